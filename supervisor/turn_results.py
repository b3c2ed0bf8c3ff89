"""`TurnResults`: the results of the turns an asyncio caller awaits at once, asked for with one
host `results` call per host and wave of endings instead of a `result` call per turn.
"""

from __future__ import annotations

import asyncio
import math
from typing import TYPE_CHECKING, Any

from grove.actors.contract import HostAPI
from grove.actors.ray_proxy import RayProxy

if TYPE_CHECKING:
    from grove.actors.turn_result import TurnResult

# A host's `results` call answers at the latest after this (empty), and is made again.
RESULTS_SLICE_S = 30.0

# A wait for a turn's result: its future and the loop time it times out at.
Waiter = tuple["asyncio.Future[TurnResult | None]", float]


class TurnResults:
    """One event loop's waits for turn results, by host. The tickets awaited in one pass of
    the loop go to their host in one call, which answers as soon as any of their turns
    ended; those still running are asked about again at once. One timer, at the soonest
    deadline, times the waits out (not a timer and a task per wait: a fan-out has
    thousands)."""

    def __init__(self) -> None:
        self._waiting: dict[Any, dict[str, list[Waiter]]] = {}
        self._unasked: dict[Any, set[str]] = {}  # by host: tickets no call asks about yet
        self._asking: set[asyncio.Task[None]] = set()
        self._expiry: asyncio.TimerHandle | None = None
        self._soonest = math.inf  # the deadline `_expiry` is set for
        self.calls = 0  # for tests and diagnostics: how many `results` calls were made

    def result(self, host: Any, ticket: str, timeout_s: float) -> asyncio.Future[TurnResult | None]:
        """The turn's result to await (TimeoutError after `timeout_s`); None: ask its host
        alone."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[TurnResult | None] = loop.create_future()
        deadline = loop.time() + timeout_s
        self._waiting.setdefault(host, {}).setdefault(ticket, []).append((future, deadline))
        unasked = self._unasked.get(host)
        if unasked is None:
            unasked = self._unasked[host] = set()
            task = loop.create_task(self._ask(host), name="grove-results")
            self._asking.add(task)
            task.add_done_callback(self._asking.discard)
        unasked.add(ticket)
        if deadline < self._soonest:
            self._expire_at(loop, deadline)
        return future

    def _expire_at(self, loop: asyncio.AbstractEventLoop, deadline: float) -> None:
        if self._expiry is not None:
            self._expiry.cancel()
        self._soonest = deadline
        self._expiry = loop.call_at(deadline, self._expire, loop)

    def _expire(self, loop: asyncio.AbstractEventLoop) -> None:
        """Time out the waits whose deadline has passed, forget those no longer awaited (a
        cancelled caller's), and set the timer for the soonest deadline left."""
        now, soonest = loop.time(), math.inf
        self._expiry, self._soonest = None, math.inf
        for waiting in self._waiting.values():
            for ticket, waiters in list(waiting.items()):
                left = []
                for future, deadline in waiters:
                    if future.done():
                        continue
                    if deadline <= now:
                        future.set_exception(TimeoutError())
                    else:
                        left.append((future, deadline))
                        soonest = min(soonest, deadline)
                if left:
                    waiting[ticket] = left
                else:
                    del waiting[ticket]
        if soonest < math.inf:
            self._expire_at(loop, soonest)

    async def _ask(self, host: Any) -> None:
        """Ask `host` about this wave's tickets until each ended or is no longer awaited."""
        tickets = self._unasked.pop(host)
        waiting = self._waiting[host]
        while tickets := {ticket for ticket in tickets if _awaited(waiting, ticket)}:
            self.calls += 1
            try:
                calls = RayProxy[HostAPI](host, HostAPI).call
                ended = await calls.results(sorted(tickets), RESULTS_SLICE_S)
            except Exception as exc:  # the host died, say: each caller sees it
                for ticket in tickets:
                    for future, _ in waiting.pop(ticket, []):
                        if not future.done():
                            future.set_exception(exc)
                continue
            for ticket, result in ended.items():
                for future, _ in waiting.pop(ticket, []):
                    if not future.done():
                        future.set_result(result)


def _awaited(waiting: dict[str, list[Waiter]], ticket: str) -> bool:
    """Whether anyone still awaits `ticket`'s result (a timed out or cancelled wait does
    not); one that nobody does is forgotten."""
    if any(not future.done() for future, _ in waiting.get(ticket, ())):
        return True
    waiting.pop(ticket, None)
    return False
