"""The supervisor's side of a turn: the host protocol, an agent's live (unstored) state, and
what a finished turn leaves in the store.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Protocol

from actors.advisor import ReviewerSpec
from actors.agent import STORED, ModelChoice, NewEntry, TurnResult
from actors.host import Activation, Ticket
from providers.base import AssistantTurn
from providers.google_cache import CachedContent
from supervisor.store.base import SPENT_KIND
from supervisor.store.records import AgentRecord, MessageRecord, NewMessage


class HostClient(Protocol):
    """The supervisor's view of one AgentHost (supervisor/remote.py wraps a Ray handle)."""

    host_id: str

    async def prepare(
        self, uuid: str, choice: ModelChoice, activation: Activation | None
    ) -> None: ...

    async def start_turn(self, ticket: Ticket, activation: Activation | None) -> None: ...

    async def start_many(
        self, items: list[tuple[Ticket, Activation]], prefix: Any, cached_content: str | None
    ) -> None: ...

    async def prepare_many(
        self, items: list[tuple[str, ModelChoice, Activation | None]]
    ) -> list[Exception | None]: ...

    async def start_turns(self, tickets: list[Ticket]) -> list[Exception | None]: ...

    async def wait_started(self, ticket_id: str, timeout_s: float) -> bool: ...

    async def create_cache(
        self, activation: Activation, prefix: Any, ttl_s: int
    ) -> CachedContent: ...

    async def drop_cache(self, choice: ModelChoice, name: str) -> None: ...

    async def switch_model(self, uuid: str, choice: ModelChoice) -> None: ...

    async def steer(self, uuid: str, entry: NewEntry) -> bool: ...

    async def steer_many(self, entries: list[tuple[str, NewEntry]]) -> int: ...

    async def cancel(self, uuid: str) -> bool: ...

    async def add_reviewer(self, spec: ReviewerSpec) -> None: ...

    async def review(self, uuid: str, delta: str) -> tuple[int, int]: ...

    async def complete(
        self, choice: ModelChoice, system: str, prompt: str, max_tokens: int
    ) -> AssistantTurn: ...

    async def reset_reviewer(self, uuid: str, primer: str) -> tuple[int, int]: ...

    async def drop_reviewer(self, uuid: str) -> None: ...

    async def reviewer_view(self, uuid: str, what: str) -> Any: ...

    async def drop(self, uuid: str) -> None: ...

    async def announce(self, uuid: str, kind: str, text: str) -> bool: ...


@dataclass(frozen=True, kw_only=True, slots=True)
class TurnTicket:
    """What `begin_turn` hands a caller: the ticket and which host streams it."""

    ticket: Ticket
    host_id: str


@dataclass(slots=True)
class LiveAgent:
    """Live state of one agent (not stored): where it runs and what it is doing."""

    host: HostClient
    active: bool = False  # the host holds the agent with its current conversation
    ready_for: ModelChoice | None = None  # the model whose provider the host has prepared
    begin_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    ticket_id: str | None = None
    turn_done: asyncio.Event = field(default_factory=asyncio.Event)
    last_result: TurnResult | None = None
    mail: asyncio.Queue[MessageRecord] = field(default_factory=asyncio.Queue)
    released: asyncio.Event = field(default_factory=asyncio.Event)  # cancel ends a sync wait
    retry_interrupted: bool = False  # a turn cut off by a dead host runs again (batch tasks)
    retrying: bool = False  # a retry of an interrupted turn is under way


def stored_entry(message: MessageRecord, kind: str | None = None) -> NewEntry:
    """The agent-side entry for a message the supervisor stored before handing it over
    (a user prompt, mail, an advisor card); a finished turn does not store it again."""
    return NewEntry(
        kind=kind or message.kind,
        content=message.content,
        data={**message.data, STORED: message.id},
    )


def turn_messages(ticket: Ticket, result: TurnResult) -> list[NewMessage]:
    """What a finished turn leaves in the store, each message keyed by its ticket; never what
    was stored before it reached the agent (its prompt, mail, advice). A turn that failed or
    was cancelled keeps no assistant or tool output, so the history stays whole, but what its
    requests used is kept, as `spent` messages (a cancelled turn keeps nothing else)."""
    new = [
        NewMessage(
            agent_uuid=ticket.uuid,
            kind=entry.kind,
            content=entry.content,
            data=entry.data,
            ticket=f"{ticket.ticket_id}:{index}",
        )
        for index, entry in enumerate(result.entries)
        if STORED not in entry.data
    ]
    if result.ok:
        answers = [i for i, message in enumerate(new) if message.kind == "assistant"]
        if result.worktree is not None and answers:  # kept with the answer, to read back
            last = answers[-1]
            data = {**new[last].data, "worktree": result.worktree}
            new[last] = new[last].model_copy(update={"data": data})
        return new
    kept = (
        [] if result.cancelled else [m for m in new if m.kind not in ("assistant", "tool_result")]
    )
    spent = [
        message.model_copy(
            update={
                "kind": SPENT_KIND,
                "data": {key: value for key, value in message.data.items() if key != "parts"},
            }
        )
        for message in new
        if message.kind == "assistant"
    ]
    return kept + spent


def turn_events(ticket: Ticket, result: TurnResult) -> list[tuple[str, dict[str, Any]]]:
    """The events of a finished turn: ToolCalled and ToolResulted for each call it made, in
    order (a failed call's detail, such as a traceback, goes here, not to the model), then
    TurnCompleted."""
    events: list[tuple[str, dict[str, Any]]] = []
    for entry in result.entries:
        facts = entry.data.get("calls", {})
        for part in (
            entry.data.get("parts", []) if entry.kind in ("assistant", "tool_result") else []
        ):
            if part.get("kind") == "tool_call":
                call = {"agent": ticket.uuid, "tool": part["name"], "call_id": part["call_id"]}
                events.append(("ToolCalled", call))
            elif part.get("kind") == "tool_result":
                fact = facts.get(part["call_id"], {})
                resulted = {
                    "agent": ticket.uuid,
                    "tool": part["name"],
                    "call_id": part["call_id"],
                    "is_error": part["is_error"],
                    "duration_ms": fact.get("duration_ms"),
                }
                if "detail" in fact:
                    resulted["detail"] = fact["detail"]
                events.append(("ToolResulted", resulted))
    completed = {
        "agent": ticket.uuid,
        "ticket": ticket.ticket_id,
        "ok": result.ok,
        "error": result.error,
        "usage": result.usage.as_dict(),
        "cost_usd": result.cost_usd,
    }
    return [*events, ("TurnCompleted", completed)]


def choice_of(record: AgentRecord) -> ModelChoice | None:
    if record.provider is None or record.model is None:
        return None
    return ModelChoice(
        provider=record.provider,  # type: ignore[arg-type]
        model=record.model,
        thinking=record.thinking_level,
    )
