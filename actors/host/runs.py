"""A host's turns in progress (`TurnRun`) and their readers: the turn's caller streams its
deltas, watchers join mid-turn, waiters take results; a run is kept a while after it ends.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

from grove.actors.agent.masking import MaskedReading
from grove.actors.agent.tool import ToolActivity
from grove.actors.host.tickets import Ticket
from grove.actors.turn_result import TurnResult
from grove.providers.stream_events import (
    CONTENT_EVENT_KINDS,
    ProviderWarning,
    Retrying,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
)

# Deltas that arrive within this window travel to a caller as one chunk.
COALESCE_WINDOW_S = 0.03
# A finished turn's result stays readable this long after it was reported.
RESULT_GRACE_S = 300.0


@dataclass(slots=True)
class TurnRun:
    """A turn in progress: deltas waiting for a reader, and the result once done."""

    ticket: Ticket
    # (kind, fragments) runs, joined when read: no copy per delta of a reply nobody reads yet.
    pending: list[tuple[str, list[str]]] = field(default_factory=list)
    # What the turn's caller reads of `pending`, masked: the deltas are kept as they came.
    masking: MaskedReading = field(default_factory=MaskedReading)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    result: TurnResult | None = None
    task: asyncio.Task[None] | None = None
    # Readers besides the turn's caller (a dashboard): each gets every delta; None ends it.
    watchers: list[asyncio.Queue[tuple[str, str] | None]] = field(default_factory=list)
    # Every delta so far (the fragments pending holds too, not copies): what a watcher who
    # comes in mid-turn is shown first.
    so_far: list[tuple[str, str]] = field(default_factory=list)
    # Set when the turn's first reply began to stream (or an attempt failed, or the turn
    # ended): what a warm-up before fan-out waits for (supervisor/warmup.py).
    started: asyncio.Event = field(default_factory=asyncio.Event)

    def push(self, event: StreamEvent | ToolActivity) -> None:
        if event.kind in CONTENT_EVENT_KINDS or event.kind == "retrying":
            self.started.set()
        match event:
            case TextDelta(text=text):
                self._add("text", text)
            case ThinkingDelta(text=text):
                self._add("thinking", text)
            case Retrying(attempt=attempt, delay_s=delay, reason=reason):
                self._add(
                    "notice", f"attempt {attempt} failed ({reason}); retrying in {delay:.1f}s"
                )
            case ProviderWarning(text=text):
                self._add("notice", text)
            case ToolActivity(kind=kind, text=text):
                self._add(kind, text)
            case _:
                return
        self.changed.set()

    def announce(self, kind: str, text: str) -> None:
        self._add(kind, text)
        self.changed.set()

    def _add(self, kind: str, text: str) -> None:
        self.so_far.append((kind, text))
        for queue in self.watchers:
            queue.put_nowait((kind, text))
        if self.pending and self.pending[-1][0] == kind and kind in ("text", "thinking"):
            self.pending[-1][1].append(text)
        else:
            self.pending.append((kind, [text]))

    def take(self, ended: bool) -> list[tuple[str, str]]:
        """What came since the last take, masked (`ended`: with what the masking held back)."""
        chunk = [(kind, "".join(fragments)) for kind, fragments in self.pending]
        self.pending = []
        self.changed.clear()
        return self.masking.shown(chunk, ended)


class TurnRuns:
    """The turns of a host by ticket id, running or lately ended, and what readers ask of them."""

    def __init__(self) -> None:
        self.runs: dict[str, TurnRun] = {}

    def ended(self, run: TurnRun, result: TurnResult) -> None:
        """The turn's result is in: its readers are told."""
        run.result = result
        run.changed.set()
        run.started.set()
        for queue in run.watchers:
            queue.put_nowait(None)

    def forget_later(self, ticket_id: str) -> None:
        """Keep a reported turn readable for RESULT_GRACE_S more."""
        asyncio.get_running_loop().call_later(RESULT_GRACE_S, self.forget, ticket_id)

    async def stream(self, ticket_id: str) -> AsyncIterator[list[tuple[str, str]]]:
        """Chunks of `(kind, text)` deltas, coalesced over a short window, until the end."""
        run = self.runs[ticket_id]
        while True:
            await run.changed.wait()
            if run.result is None:
                await asyncio.sleep(COALESCE_WINDOW_S)
            # Whether it had ended before this take: deltas pushed while the chunk is on its
            # way (the yield lets the turn run on) and then its end come in the next take.
            ended = run.result is not None
            chunk = run.take(ended)
            if chunk:
                yield chunk
            if ended:
                return

    async def watch(
        self, uuid: str, ticket_id: str | None = None
    ) -> AsyncIterator[list[tuple[str, str]]]:
        """The deltas of the agent's turn in progress, those so far first, to its end, for a
        reader that did not start it (nothing when no turn is in progress). With `ticket_id`:
        that turn's, even when it has ended since (while its result is kept), so a reader who
        comes late to a short turn still reads all of it."""
        if ticket_id is None:
            running = (r for r in self.runs.values() if r.ticket.uuid == uuid and r.result is None)
            run = next(running, None)
        else:
            run = self.runs.get(ticket_id)
        if run is None or run.ticket.uuid != uuid:
            return
        queue: asyncio.Queue[tuple[str, str] | None] = asyncio.Queue()
        for delta in run.so_far:
            queue.put_nowait(delta)
        if run.result is not None:
            queue.put_nowait(None)
        else:
            run.watchers.append(queue)
        masking = MaskedReading()  # a reader of its own: its own held-back text
        try:
            ended = False
            while not ended:
                item = await queue.get()
                chunk: list[tuple[str, str]] = []
                while True:  # what has come since, as one chunk
                    if item is None:
                        ended = True
                        break
                    chunk.append(item)
                    if queue.empty():
                        break
                    item = queue.get_nowait()
                shown = masking.shown(chunk, ended)
                if shown:
                    yield shown
        finally:
            if queue in run.watchers:
                run.watchers.remove(queue)

    async def wait_started(self, ticket_id: str, timeout_s: float) -> bool:
        """Wait until the turn's first reply has begun (its first content arrived), an attempt
        of it failed, or it ended; False when `timeout_s` passed first (or it is unknown)."""
        run = self.runs.get(ticket_id)
        if run is None:
            return False
        try:
            await asyncio.wait_for(run.started.wait(), timeout_s)
        except TimeoutError:
            return False
        return True

    async def result(self, ticket_id: str) -> TurnResult:
        run = self.runs[ticket_id]
        if run.task is not None:
            await asyncio.shield(run.task)
        assert run.result is not None
        return run.result

    async def results(
        self, ticket_ids: Sequence[str], timeout_s: float
    ) -> dict[str, TurnResult | None]:
        """Of the turns `ticket_ids`, those that ended, once at least one has ({} after
        `timeout_s`): many callers' `result` waits in one call. None for a turn to ask
        `result` about alone (unknown here, or ended without a result)."""
        runs = {ticket: self.runs.get(ticket) for ticket in ticket_ids}
        running = [
            run.task
            for run in runs.values()
            if run is not None and run.task is not None and not run.task.done()
        ]
        if running and len(running) == len(runs):
            await asyncio.wait(running, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
        return {
            ticket: _ended_result(run)
            for ticket, run in runs.items()
            if run is None or run.task is None or run.task.done()
        }

    def forget(self, ticket_id: str) -> None:
        self.runs.pop(ticket_id, None)

    async def announce(self, uuid: str, kind: str, text: str) -> bool:
        """Put a line of `kind` (an approval request, say) into the agent's running turn's
        stream; False when it runs none."""
        for run in self.runs.values():
            if run.ticket.uuid == uuid and run.result is None:
                run.announce(kind, text)
                return True
        return False

    async def cancel(self, uuid: str) -> bool:
        """Cancel the agent's running turn, if any; its partial answer is not kept."""
        cancelled = False
        for run in self.runs.values():
            if run.ticket.uuid == uuid and run.result is None and run.task is not None:
                run.task.cancel()
                cancelled = True
        return cancelled


def _ended_result(run: TurnRun | None) -> TurnResult | None:
    """An ended turn's result as `result` would give it; None when that would raise."""
    if run is None or (run.task is not None and (run.task.cancelled() or run.task.exception())):
        return None
    return run.result
