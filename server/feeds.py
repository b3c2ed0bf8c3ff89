"""`EventFeed`: the event log as it grows, read by one task for all of the service's event
streams. A stream waits on an asyncio condition for events after its cursor; none holds a
thread (the feed's own reads, and a stream's catching up on older events, are short calls
in a thread).
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
from collections.abc import Callable

from grove.supervisor.store import EventRecord, Store

WAIT_S = 1.0  # how long one read of the feed waits for news before it looks again
KEEP = 10_000  # recent events kept for the streams; an older cursor is served by the store
PAGE = 1000


class EventFeed:
    """Started by its first reader, it follows the log until the service stops (`close`)."""

    def __init__(self, open_store: Callable[[], Store]) -> None:
        self._open_store = open_store
        self._ids: list[int] = []
        self._events: list[EventRecord] = []
        self._covered_from = 0  # every event with a larger id, up to _last, is held
        self._last = 0
        self._changed = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None
        self._started = asyncio.Event()
        self._history: Store | None = None  # for cursors older than what is held
        self._history_lock = asyncio.Lock()

    async def start(self) -> None:
        """Follow the log from its end, if not yet; the store's error if it cannot."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._follow())
        started = asyncio.ensure_future(self._started.wait())
        await asyncio.wait({started, self._task}, return_when=asyncio.FIRST_COMPLETED)
        started.cancel()
        self._check()

    @property
    def last_id(self) -> int:
        """The newest event the feed has read."""
        return self._last

    def _check(self) -> None:
        """Raise what stopped the feed, if it stopped."""
        if self._task is not None and self._task.done():
            self._task.result()
            raise RuntimeError("the event feed stopped")

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._history is not None:
            history, self._history = self._history, None
            await asyncio.to_thread(history.close)

    async def _follow(self) -> None:
        store = await asyncio.to_thread(self._open_store)
        try:
            self._ids.clear()
            self._events.clear()
            self._last = self._covered_from = await asyncio.to_thread(store.last_event_id)
            self._started.set()
            while True:
                batch = await asyncio.to_thread(store.wait_events, self._last, WAIT_S, PAGE)
                if batch:
                    self._hold(batch)
                    async with self._changed:
                        self._changed.notify_all()
        finally:
            await asyncio.to_thread(store.close)

    def _hold(self, batch: list[EventRecord]) -> None:
        self._events.extend(batch)
        self._ids.extend(event.id for event in batch)
        self._last = batch[-1].id
        if len(self._ids) > 2 * KEEP:
            self._covered_from = self._ids[-KEEP - 1]
            del self._ids[:-KEEP], self._events[:-KEEP]

    async def after(self, cursor: int, timeout_s: float) -> list[EventRecord]:
        """Up to PAGE events after `cursor`, waiting up to `timeout_s` when there are none."""
        self._check()
        if cursor < self._covered_from:
            return await self._older(cursor)
        if cursor >= self._last:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout_s), self._changed:
                    await self._changed.wait_for(lambda: self._last > cursor)
        start = bisect.bisect_right(self._ids, cursor)
        return self._events[start : start + PAGE]

    async def _older(self, cursor: int) -> list[EventRecord]:
        async with self._history_lock:
            if self._history is None:
                self._history = await asyncio.to_thread(self._open_store)
            return await asyncio.to_thread(self._history.events, cursor, PAGE)
