"""`TurnResults`: the results of the turns an asyncio caller awaits at once, asked for with one
host `results` call per host and wave of endings instead of a `result` call per turn.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from actors.agent import TurnResult

# A host's `results` call answers at the latest after this (empty), and is made again.
RESULTS_SLICE_S = 30.0


class TurnResults:
    """One event loop's waits for turn results, by host. The tickets awaited in one pass of
    the loop go to their host in one call, which answers as soon as any of their turns
    ended; those still running are asked about again at once."""

    def __init__(self) -> None:
        self._waiting: dict[Any, dict[str, list[asyncio.Future[TurnResult | None]]]] = {}
        self._unasked: dict[Any, set[str]] = {}  # by host: tickets no call asks about yet
        self._asking: set[asyncio.Task[None]] = set()
        self.calls = 0  # for tests and diagnostics: how many `results` calls were made

    async def result(self, host: Any, ticket: str, timeout_s: float) -> TurnResult | None:
        """The turn's result (TimeoutError after `timeout_s`); None: ask its host alone."""
        future: asyncio.Future[TurnResult | None] = asyncio.get_running_loop().create_future()
        waiting = self._waiting.setdefault(host, {})
        waiting.setdefault(ticket, []).append(future)
        unasked = self._unasked.get(host)
        if unasked is None:
            unasked = self._unasked[host] = set()
            task = asyncio.get_running_loop().create_task(self._ask(host), name="grove-results")
            self._asking.add(task)
            task.add_done_callback(self._asking.discard)
        unasked.add(ticket)
        try:
            return await asyncio.wait_for(future, timeout_s)
        finally:
            futures = waiting.get(ticket, [])
            if future in futures:  # timed out or cancelled: no longer awaited here
                futures.remove(future)
            if not futures:
                waiting.pop(ticket, None)

    async def _ask(self, host: Any) -> None:
        """Ask `host` about this wave's tickets until each ended or is no longer awaited."""
        tickets = self._unasked.pop(host)
        waiting = self._waiting[host]
        while tickets := {ticket for ticket in tickets if waiting.get(ticket)}:
            self.calls += 1
            try:
                ended: dict[str, TurnResult | None] = await host.results.remote(
                    sorted(tickets), RESULTS_SLICE_S
                )
            except Exception as exc:  # the host died, say: each caller sees it
                for ticket in tickets:
                    for future in waiting.pop(ticket, []):
                        if not future.done():
                            future.set_exception(exc)
                continue
            for ticket, result in ended.items():
                for future in waiting.pop(ticket, []):
                    if not future.done():
                        future.set_result(result)
