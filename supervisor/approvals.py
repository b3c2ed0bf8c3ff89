"""Approvals for tools whose policy is "ask": the supervisor records each request, tells the
session's interface through the turn's stream, and waits for its answer (y, n, or a: always).

A session nobody attended to (run, batch, an API caller without `approver=`) is refused at
once, with how to allow the tool. Requests, approvals and refusals are events.
"""

from __future__ import annotations

import asyncio
import json
import uuid as uuidlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from grove.supervisor.tool_rules import refusal_text

if TYPE_CHECKING:
    from grove.supervisor.core import SupervisorCore

ANSWERS = {"y": "approved", "n": "refused", "a": "approved for the session"}
# Answered before the host's own wait for the call (actors/contract.py) gives up.
ANSWER_TIMEOUT_S = 540.0
ARGUMENTS_SHOWN_CHARS = 2_000
ANNOUNCE_TIMEOUT_S = 30.0


@dataclass(frozen=True, kw_only=True, slots=True)
class ApprovalRequest:
    """What an approver is shown: which agent wants to run which tool, with what."""

    request: str
    session: str
    agent: str
    tool: str
    arguments: str  # JSON, cut at ARGUMENTS_SHOWN_CHARS


@dataclass(kw_only=True, slots=True)
class _Pending:
    session: str
    agent: str
    tool: str
    answer: asyncio.Future[str] = field(default_factory=asyncio.Future)


class ApprovalDesk:
    def __init__(self, core: SupervisorCore) -> None:
        self._core = core
        self._attended: set[str] = set()
        self._always: dict[str, set[str]] = {}
        self._pending: dict[str, _Pending] = {}

    def attend(self, session: str, on: bool) -> None:
        """An interface that can ask a person starts (or stops) answering for `session`."""
        root = self._core.agent(session).uuid
        if on:
            self._attended.add(root)
        else:
            self._attended.discard(root)
            for request_id, pending in list(self._pending.items()):
                if pending.session == root and not pending.answer.done():
                    pending.answer.set_result("n")
                    del self._pending[request_id]

    async def request(self, agent: str, tool: str, arguments: dict[str, Any]) -> tuple[bool, str]:
        """(True, "") when the call may run, else (False, why not)."""
        record = self._core.agent(agent)
        session = self._core.root_of(record).uuid
        if tool in self._always.get(session, set()):
            self._core.event("ToolApproved", agent=record.uuid, tool=tool, by="session")
            return True, ""
        if session not in self._attended:
            self._core.event("ToolRefused", agent=record.uuid, tool=tool, by="nobody to ask")
            return False, refusal_text(tool)
        request_id = uuidlib.uuid4().hex
        pending = self._pending[request_id] = _Pending(
            session=session, agent=record.uuid, tool=tool
        )
        self._core.event("ApprovalRequested", agent=record.uuid, tool=tool, request=request_id)
        shown = json.dumps(arguments, ensure_ascii=False)[:ARGUMENTS_SHOWN_CHARS]
        notice = {
            "request": request_id,
            "session": session,
            "agent": record.uuid,
            "tool": tool,
            "arguments": shown,
        }
        host = self._core.live(record.uuid).host
        await asyncio.wait_for(
            host.announce(record.uuid, "approval", json.dumps(notice)), ANNOUNCE_TIMEOUT_S
        )
        try:
            answer = await asyncio.wait_for(pending.answer, ANSWER_TIMEOUT_S)
        except TimeoutError:
            answer = "n"
        finally:
            self._pending.pop(request_id, None)
        if answer == "a":
            self._always.setdefault(session, set()).add(tool)
        approved = answer in ("y", "a")
        self._core.event(
            "ToolApproved" if approved else "ToolRefused", agent=record.uuid, tool=tool, by="user"
        )
        return (True, "") if approved else (False, f"The user did not allow {tool} this time.")

    def answer(self, request_id: str, decision: str) -> str:
        """Record a person's answer; the text says what it did."""
        if decision not in ANSWERS:
            raise ValueError(f"answer y, n or a, not {decision!r}")
        pending = self._pending.get(request_id)
        if pending is None or pending.answer.done():
            return "That request is no longer waiting"
        pending.answer.set_result(decision)
        return f"{pending.tool}: {ANSWERS[decision]}"
