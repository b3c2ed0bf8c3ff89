"""`ReportBatcher`: a host's finished turns go to the supervisor together, one call per batch.

Plain asyncio; `TurnRecords.send_reports` (supervisor_gates.py) is the call itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from grove.actors.host.tickets import Ticket
from grove.actors.turn_result import TurnResult

REPORT_ATTEMPTS = 5
REPORT_BACKOFF_S = 0.2

Finished = tuple[Ticket, TurnResult]
# Sends finished turns; returns the ticket ids that were NOT stored (all of them when the
# call itself failed), to be sent again.
SendReports = Callable[[list[Finished]], Awaitable[list[str]]]


class ReportBatcher:
    """Reports that arrive while a call is in flight travel together in the next call, so a
    burst of finishing turns costs a few calls and store transactions, not one each; a lone
    report is sent at once. `report` returns when its turn is stored or the attempts ran out."""

    def __init__(
        self,
        send: SendReports,
        *,
        attempts: int = REPORT_ATTEMPTS,
        backoff_s: float = REPORT_BACKOFF_S,
    ) -> None:
        self._send = send
        self._attempts = attempts
        self._backoff_s = backoff_s
        self._queue: list[tuple[Finished, asyncio.Future[None]]] = []
        self._flusher: asyncio.Task[None] | None = None
        self.calls = 0  # for tests and diagnostics: how many calls carried the reports

    async def report(self, ticket: Ticket, result: TurnResult) -> None:
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.append(((ticket, result), done))
        if self._flusher is None:
            self._flusher = asyncio.create_task(self._flush(), name="turn-reports")
        await asyncio.shield(done)

    async def _flush(self) -> None:
        try:
            while self._queue:
                batch, self._queue = self._queue, []
                await self._deliver(batch)
        finally:
            self._flusher = None
            for _, done in self._queue:  # only left here when this task was cancelled
                if not done.done():
                    done.set_result(None)

    async def _deliver(self, batch: list[tuple[Finished, asyncio.Future[None]]]) -> None:
        pending = batch
        try:
            for attempt in range(self._attempts):
                if attempt:
                    await asyncio.sleep(self._backoff_s * 2 ** (attempt - 1))
                self.calls += 1
                failed = set(await self._send([item for item, _ in pending]))
                for item, done in pending:
                    if item[0].ticket_id not in failed and not done.done():
                        done.set_result(None)
                pending = [(item, done) for item, done in pending if item[0].ticket_id in failed]
                if not pending:
                    return
        finally:
            for _, done in pending:  # given up (or cancelled): the waiters go on
                if not done.done():
                    done.set_result(None)
