"""`SupervisorCalls`: the part of `Grove` that is one supervisor call a method (asked through
its `SupervisorLink`, typed by `SupervisorService`); supervisor/api.py builds `Grove` on it.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, TypeVar

from grove.actors.turn_result import TurnResult
from grove.supervisor.commands.registry import CommandOutcome
from grove.supervisor.contract import SupervisorService
from grove.supervisor.errors import SupervisorError
from grove.supervisor.output_models import OutputModels
from grove.supervisor.store.records import AgentRecord, MessageRecord
from grove.supervisor.supervisor_link import CALL_TIMEOUT_S, SupervisorLink

T = TypeVar("T")


class SupervisorCalls:
    """Calls of the supervisor that `_link` reaches once started (None before)."""

    _link: SupervisorLink | None
    _outputs: OutputModels  # the results it hands back are typed by them

    def _link_started(self) -> SupervisorLink:
        if self._link is None:
            raise SupervisorError("this Grove has not started: call start() or use `with`")
        return self._link

    def _answer(self, call: Awaitable[T], timeout_s: float | None = None) -> T:
        """The supervisor's answer to `call` (see SupervisorLink.answer)."""
        return self._link_started().answer(call, timeout_s)

    @property
    def _service(self) -> SupervisorService:
        """The supervisor, as its contract: each method a call, for `_answer` to wait for."""
        return self._link_started().service

    def release_caches(self, agent: str | None = None) -> int:
        """Delete the provider-side cache entries (Gemini `cachedContents`) made for the
        children of `agent` (of every agent: None); how many. A batch does this at its end;
        closing a Grove that started Ray does it for all."""
        return self._answer(self._service.release_caches(agent))

    def seed(self, agent: str, entries: list[tuple[str, str]]) -> list[MessageRecord]:
        """Append `(kind, content)` user and assistant messages to `agent`'s history in one
        store call, running no turn: a shared context for the children it will fork."""
        return self._answer(self._service.seed(agent, entries), 600)

    def set_todo(self, session: str, markdown: str) -> str:
        """Replace the session's focused agent's todo list with `markdown` (the `/todo` form:
        `# Phase`, `- [ ]`, `- [/]` or `- [>]`, `- [x]`, `- [-]` or `- [~]`); the new list."""
        return self._answer(self._service.set_todo(session, markdown))

    def advice(self, agent: str) -> list[MessageRecord]:
        """The advisor cards delivered to `agent`, oldest first."""
        return self._answer(self._service.advice(agent))

    def wait_reviews(self, agent: str, timeout_s: float = 60.0) -> int:
        """Wait until `agent`'s reviewers have nothing queued; the backlog left at timeout."""
        return self._answer(self._service.wait_reviews(agent, timeout_s), timeout_s + 30)

    def route_mail(self, mails: list[tuple[str, str, str]]) -> list[int]:
        """Deliver many `(sender, recipient, text)` mails with one supervisor call, one store
        transaction and one `MailRouted` event; each reaches its recipient as `/send` would.
        CommandError, nothing stored, when a recipient is unknown or has ended."""
        return self._answer(self._service.route_mail(mails), CALL_TIMEOUT_S * 5)

    def attend_approvals(self, session: str, on: bool) -> None:
        """For a program that answers approvals itself (the HTTP service's client): while
        `on`, the session's "ask" tools wait for an answer, and their requests come as
        ("approval", JSON) in the turn's stream instead of going to an approver here."""
        self._answer(self._service.attend_approvals(session, on))

    def answer_approval(self, request_id: str, decision: str) -> str:
        """Answer an approval request: "y", "n" or "a" (always, for this session)."""
        return self._answer(self._service.answer_approval(request_id, decision))

    def dispatch(self, session: str, line: str, origin: str = "api") -> CommandOutcome:
        return self._answer(self._service.dispatch(session, line, origin), 3600)

    def focus(self, session: str) -> str:
        return self._answer(self._service.focus(session))

    def agent(self, prefix: str) -> AgentRecord:
        return self._answer(self._service.agent(prefix))

    def history(self, agent: str) -> list[MessageRecord]:
        return self._answer(self._service.conversation(agent))

    def streaming(self, agent: str) -> bool:
        return self._answer(self._service.streaming(agent))

    def turns_in_flight(self) -> int:
        """How many agents have a turn in flight now (a service's idle stop waits for none)."""
        return self._answer(self._service.turns_in_flight())

    def cancel(self, agent: str) -> bool:
        return self._answer(self._service.cancel(agent))

    def host_pids(self) -> dict[str, int]:
        """The process id of each live agent host, by host id."""
        return self._answer(self._service.host_pids())

    def provider_identity(self, agent: str) -> dict[str, Any]:
        return self._answer(self._service.provider_identity(agent))

    def answered(self, keys: list[str]) -> dict[str, tuple[str, TurnResult]]:
        """Children forked under any of `keys` that have a stored answer: key -> (agent,
        result). What an interrupted batch already finished, found again on its rerun."""
        found = self._answer(self._service.answered(keys), 600)
        return {
            key: (agent, self._outputs.typed(agent, result))
            for key, (agent, result) in found.items()
        }

    def wait_any(self, agents: list[str], timeout_s: float) -> dict[str, TurnResult | None]:
        """Results of those of `agents` that are done, once at least one is ({} on timeout)."""
        done = self._answer(self._service.wait_any(agents, timeout_s), timeout_s + CALL_TIMEOUT_S)
        return {
            agent: None if result is None else self._outputs.typed(agent, result)
            for agent, result in done.items()
        }

    def wait_turn(self, agent: str, timeout_s: float = 3600.0) -> TurnResult | None:
        result = self._answer(self._service.wait_turn(agent, timeout_s), timeout_s + CALL_TIMEOUT_S)
        return None if result is None else self._outputs.typed(agent, result)
