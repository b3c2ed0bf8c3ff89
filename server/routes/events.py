"""The event log: a page of it, its trimming, and its stream (resumable with Last-Event-ID)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request
from sse_starlette.event import ServerSentEvent
from sse_starlette.sse import EventSourceResponse

from grove.server.feeds import EventFeed
from grove.server.routes.fields import store_reads
from grove.supervisor.api import Grove
from grove.supervisor.reads import event_json
from grove.supervisor.store import EventRecord

EVENT_WAIT_S = 1.0  # how long an event stream waits for news before it looks again


def events_router(grove: Grove, feed: EventFeed) -> APIRouter:
    router = APIRouter()

    @router.get("/api/events")
    def events(after: int = 0, limit: int = 1000) -> dict[str, Any]:
        with store_reads(grove) as opened:
            return {"events": opened.events(after, max(1, min(limit, 10_000)))}

    @router.post("/api/events/trim")
    def trim_events() -> dict[str, Any]:
        """Delete the events older than [events] keep_days now (the service also does it
        every hour)."""
        with store_reads(grove) as opened:
            return opened.trim_events()

    @router.get("/api/events/stream")
    async def event_stream(request: Request, after: int = 0) -> EventSourceResponse:
        """The event log as it grows; reconnecting with Last-Event-ID resumes after it."""
        resume = request.headers.get("last-event-id")
        start = int(resume) if resume and resume.isdigit() else after

        async def follow() -> AsyncIterator[bytes]:
            await feed.start()
            last = start
            while not await request.is_disconnected():
                batch = await feed.after(last, EVENT_WAIT_S)
                if batch:  # one write for the lot
                    last = batch[-1].id
                    yield b"".join(map(event_bytes, batch))

        return EventSourceResponse(follow())

    return router


def event_bytes(event: EventRecord) -> bytes:
    """The event as one Server-Sent Event, its id the event's."""
    data = json.dumps(event_json(event))
    return ServerSentEvent(id=str(event.id), event=event.kind, data=data).encode()
