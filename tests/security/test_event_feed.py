"""The service's one reader of the event log (server/feeds.py), on a real SQLite store: a stream
following it gets every event once and in order while more than it holds arrive, a cursor
older than what it holds is served from the store, and a stream with nothing new waits
without a thread and comes back empty at its timeout.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from grove.server.feeds import KEEP, EventFeed
from grove.supervisor.store import SqliteStore


async def test_a_stream_gets_every_event_once_in_order(tmp_path: Path) -> None:
    path = tmp_path / "events.sqlite3"
    writer = SqliteStore(path)
    writer.append_event("Before", {"n": -1})
    feed = EventFeed(lambda: SqliteStore(path))
    try:
        await feed.start()
        start = writer.last_event_id()
        total = 2 * KEEP + 500  # past what the feed holds: it drops its oldest on the way

        def append() -> None:
            for n in range(total):
                writer.append_event("Counted", {"n": n})

        appending = threading.Thread(target=append)
        appending.start()
        seen: list[int] = []
        cursor = start
        while len(seen) < total:
            batch = await feed.after(cursor, 5.0)
            assert batch, f"nothing new after {cursor} with {len(seen)} of {total} seen"
            seen += [event.payload["n"] for event in batch]
            cursor = batch[-1].id
        appending.join()
        assert seen == list(range(total))
        old = await feed.after(0, 0.1)  # older than anything held: from the store
        assert [event.payload["n"] for event in old[:2]] == [-1, 0]
        threads = threading.active_count()
        assert await feed.after(writer.last_event_id(), 0.2) == []
        assert threading.active_count() <= threads + 1  # the feed's own reader, at most
    finally:
        await feed.close()
        writer.close()


async def test_many_waiting_streams_hold_no_threads(tmp_path: Path) -> None:
    path = tmp_path / "events.sqlite3"
    writer = SqliteStore(path)
    feed = EventFeed(lambda: SqliteStore(path))
    try:
        await feed.start()
        cursor = writer.last_event_id()
        threads = threading.active_count()
        waiting = [asyncio.ensure_future(feed.after(cursor, 30.0)) for _ in range(500)]
        await asyncio.sleep(0.5)
        assert threading.active_count() <= threads + 1
        await asyncio.to_thread(writer.append_event, "Woken", {})
        answers = await asyncio.wait_for(asyncio.gather(*waiting), 30)
        assert {tuple(event.kind for event in answer) for answer in answers} == {("Woken",)}
    finally:
        await feed.close()
        writer.close()
