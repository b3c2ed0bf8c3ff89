"""The tree of agents: every agent with its tokens, cost and context (`/api/agents`), and the
same as a stream of what changed (`/api/tree/stream`) for the dashboard.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request
from sse_starlette.event import ServerSentEvent
from sse_starlette.sse import EventSourceResponse
from starlette.concurrency import run_in_threadpool

from grove.server.feeds import EventFeed
from grove.supervisor.api import Grove
from grove.supervisor.store import Store, open_store
from grove.supervisor.tree_view import TreeView, listing

TREE_EVERY_S = 0.3  # the tree's stream sends what changed at most this often
TREE_IDLE_S = 5.0  # and without events (what changes agents), looks again this often


def tree_router(grove: Grove, feed: EventFeed) -> APIRouter:
    router = APIRouter()
    tree = TreeView()  # the dashboard asks for the tree often: unchanged agents are not read

    def store() -> Store:
        return open_store(grove.settings.store)

    @router.get("/api/agents")
    def agents(since: str | None = None, include_ended: bool | None = None) -> dict[str, Any]:
        """Every agent with its tokens, cost and share of its context window, each tree's
        totals, and a `cursor`: given as `since`, only the agents changed after that answer
        come (`complete` is false then). With `include_ended`, the list `grove agents` shows:
        oldest first, only running agents unless it is true."""
        opened = store()
        try:
            answer = tree.rows(opened, since)
        finally:
            opened.close()
        return answer if include_ended is None else listing(answer, include_ended)

    @router.get("/api/tree/stream")
    async def tree_stream(request: Request, since: str | None = None) -> EventSourceResponse:
        """The tree as it changes, one `rows` event at most every 0.3 s, shaped as the
        answers of /api/agents: the first holds every agent (or those changed after `since`),
        each later one what changed after the one before. Each event's id is its cursor, so
        a reconnect with Last-Event-ID resumes. The tree is read again when the event log
        grows (or after TREE_IDLE_S), not every 0.3 s whatever happens."""
        cursor = request.headers.get("last-event-id") or since

        async def follow() -> AsyncIterator[bytes]:
            nonlocal cursor
            await feed.start()
            opened = await run_in_threadpool(store)
            try:
                first = True
                while not await request.is_disconnected():
                    seen = feed.last_id  # what these rows have seen at least
                    answer = await run_in_threadpool(tree.rows, opened, cursor)
                    if first or answer["agents"] or answer["trees"] or answer["complete"]:
                        cursor, first = answer["cursor"], False
                        data = json.dumps(answer)
                        yield ServerSentEvent(id=cursor, event="rows", data=data).encode()
                    await asyncio.sleep(TREE_EVERY_S)
                    await feed.after(seen, TREE_IDLE_S)  # a quiet tree is not read again
            finally:
                opened.close()

        return EventSourceResponse(follow())

    return router
