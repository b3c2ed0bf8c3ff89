"""`TurnStarts`: how a Grove begins turns. For an asyncio caller, the asks its loop makes at once
share one supervisor `begin_turns` call (supervisor/core/coalesced_turns.py), and their results
are asked for together (supervisor/turn_results.py); one alone goes as it would without company.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from grove.actors.coalesce import Coalescer
from grove.actors.output import OutputType
from grove.actors.turn_result import TurnResult
from grove.supervisor import bridge
from grove.supervisor.core.coalesced_turns import TurnRequest
from grove.supervisor.supervisor_link import CALL_TIMEOUT_S, SupervisorLink
from grove.supervisor.turn_results import TurnResults
from grove.supervisor.turns import Begun


@dataclass(frozen=True, slots=True)
class LoopTurns:
    """An asyncio loop's asks made at once: begun together, their results asked for
    together."""

    starts: Coalescer[TurnRequest, Any]
    results: TurnResults


class TurnStarts:
    """The turns a Grove begins through the supervisor `link` gives (each asyncio loop with
    its own batching)."""

    def __init__(self, link: Callable[[], SupervisorLink]) -> None:
        self._link = link
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopTurns] = (
            weakref.WeakKeyDictionary()
        )

    def begin(self, agent: str, text: str, output: OutputType | None) -> Begun:
        """The supervisor's `begin_turn`, shared with the asks an asyncio caller's loop makes
        at once; one alone, or one whose agent is busy, goes as before."""
        if bridge.bridged():
            begun: Begun | Exception | None = bridge.awaited(
                self.loop_turns().starts.call((agent, text, output))
            )
            if isinstance(begun, Exception):
                raise begun
            if begun is not None:
                return begun
        link = self._link()
        return link.answer(link.service.begin_turn(agent, text, output))

    def loop_turns(self) -> LoopTurns:
        """The running loop's batching of turn beginnings and results (each loop has its
        own)."""
        loop = asyncio.get_running_loop()
        turns = self._loops.get(loop)
        if turns is None:
            starts = Coalescer(self._begin_many, "grove-begin-turns")
            turns = self._loops[loop] = LoopTurns(starts, TurnResults())
        return turns

    def result_wait(self, host: Any, ticket: str, timeout_s: float) -> Awaitable[TurnResult | None]:
        """A turn's result, awaited with the others the running loop awaits at once."""
        return self.loop_turns().results.result(host, ticket, timeout_s)

    async def _begin_many(self, requests: list[TurnRequest]) -> list[Any]:
        """Begin the requests' turns in one supervisor call; a lone one: None, for its
        caller to begin as it would have without company."""
        if len(requests) == 1:
            return [None]
        link = self._link()
        outcomes: list[Any] = await bridge.bridge(
            link.answer, link.service.begin_turns(requests), CALL_TIMEOUT_S * 5
        )
        return outcomes
