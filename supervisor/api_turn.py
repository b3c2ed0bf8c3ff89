"""`Turn`: a turn in progress as `Grove` hands it out, its deltas streamed straight from its host
(followed to the host it resumes on when one dies) and its result from the host, or from the
supervisor for a resumed turn.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import ray
from pydantic import BaseModel

from grove.actors.contract import HostAPI
from grove.actors.ray_proxy import RayProxy, stream_of, waited
from grove.actors.turn_result import TurnResult
from grove.supervisor import bridge
from grove.supervisor.errors import TurnTimeout
from grove.supervisor.host_deaths import host_died_notice
from grove.supervisor.output_types import typed
from grove.supervisor.ray_waits import got
from grove.supervisor.supervisor_link import CALL_TIMEOUT_S, SupervisorLink

RESUME_WAIT_S = 120.0  # how long a reader waits for a turn cut off by its host to resume
# How many host deaths in a row one reader follows a turn across before it stops reading.
MAX_FOLLOWS = 20
# How an asyncio caller awaits a turn's result with the others its loop awaits: (host,
# ticket, timeout) to the result, or None for the host to be asked alone.
ResultWait = Callable[[Any, str, float], Awaitable[TurnResult | None]]


def host_calls(host: Any) -> HostAPI:
    """The host actor behind the handle `host`, as its contract."""
    return RayProxy[HostAPI](host, HostAPI).call


def watched(host: Any, agent: str, ticket: str | None) -> Any:
    """Ray's generator of the deltas of the agent's turn `ticket` on `host`, those so far first."""
    return stream_of(host_calls(host).watch(agent, ticket)).refs()


def streamed(
    supervisor: SupervisorLink, agent: str, ticket: str, stream: Any
) -> Iterator[tuple[str, str]]:
    """The deltas of a host's streaming generator (of the turn `ticket`), each chunk waited
    for as `got` does; when its host dies, a notice, then those of the turn resumed on
    another host, from its resumption on."""
    for _ in range(MAX_FOLLOWS):
        try:
            while True:
                try:
                    ref = bridge.awaited(stream.__anext__()) if bridge.bridged() else next(stream)
                except (StopIteration, StopAsyncIteration):
                    return
                yield from got(ref, CALL_TIMEOUT_S * 10)
        except ray.exceptions.RayActorError as exc:
            yield host_died_notice(str(exc))  # Grove's line for it; Ray's report is not shown
        resumed = supervisor.answer(
            supervisor.service.resumed_host(agent, ticket, RESUME_WAIT_S), RESUME_WAIT_S + 30
        )
        if resumed is None:
            return
        host, ticket = resumed
        stream = watched(host, agent, ticket)


class Turn:
    """A turn in progress: iterate for `(kind, text)` deltas; `result()` waits for its end.

    When the host dies under it, a notice comes, then the deltas of the turn resumed on
    another host (from its last stored step on), and `result()` answers from the supervisor
    with the resumed turn's result."""

    def __init__(
        self,
        ticket_id: str,
        agent: str,
        host: Any,
        supervisor: SupervisorLink,
        on_approval: Callable[[str], None] | None = None,
        output_model: type[BaseModel] | None = None,
        results: ResultWait | None = None,
    ) -> None:
        """`results`: how an asyncio caller awaits the result with others at once."""
        self.ticket_id = ticket_id
        self.output_model = output_model  # a typed answer is read into it
        self.agent = agent
        self._host = host
        self._supervisor = supervisor
        self._on_approval = on_approval
        self._results = results
        self._read = False

    def __iter__(self) -> Iterator[tuple[str, str]]:
        """The turn's deltas; an approval request goes to the session's approver instead."""
        self._read = True
        stream = stream_of(host_calls(self._host).stream(self.ticket_id)).refs()
        for kind, text in streamed(self._supervisor, self.agent, self.ticket_id, stream):
            if kind == "approval" and self._on_approval is not None:
                self._on_approval(text)
            else:
                yield kind, text

    def result(self, timeout_s: float = 3600.0) -> TurnResult:
        if self._on_approval is not None and not self._read:
            for _ in self:  # approval requests arrive in the stream: someone must read it
                pass
        try:
            result = self._result_within(timeout_s)
        except TimeoutError:  # Ray's or the loop's: said as a RemoteTurn says it
            result = None
        if result is None:
            raise TurnTimeout(self.agent, timeout_s)
        return self.typed(result)

    def _result_within(self, timeout_s: float) -> TurnResult | None:
        """The host's result of the turn, or, when the host died under it, the supervisor's of
        the turn resumed elsewhere (None: it did not end in time)."""
        try:
            return self._host_result(timeout_s)
        except ray.exceptions.RayActorError:
            supervisor = self._supervisor
            waiting = supervisor.service.wait_turn(self.agent, timeout_s)
            return supervisor.answer(waiting, timeout_s + 30)

    def batched_result(self, timeout_s: float) -> Awaitable[TurnResult | None] | None:
        """For an asyncio caller: the host's result of the turn, to await together with the
        others its loop awaits at once (supervisor/turn_results.py); None when there is no
        such batching or approval requests are still to be read first. When it gives None,
        or raises RayActorError, `result` knows what to do next."""
        if self._results is None or (self._on_approval is not None and not self._read):
            return None
        return self._results(self._host, self.ticket_id, timeout_s)

    def typed(self, result: TurnResult) -> TurnResult:
        """The turn's result with its answer read into its output model, if it has one."""
        return typed(result, self.output_model)

    def _host_result(self, timeout_s: float) -> TurnResult:
        """The host's result of the turn: for an asyncio caller, asked for together with
        the others its loop awaits at once."""
        if bridge.bridged() and (waiting := self.batched_result(timeout_s)) is not None:
            found = bridge.awaited(waiting)
            if found is not None:
                return found
        asked = waited(host_calls(self._host).result(self.ticket_id))
        result: TurnResult = got(asked.ref(), timeout_s)
        return result
