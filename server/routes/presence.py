"""The service's presence: `/api/service` (its clients and work, as `grove status` shows them)
and the presence stream a client holds open while it may sit idle (a chat).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter
from sse_starlette.event import ServerSentEvent
from sse_starlette.sse import EventSourceResponse

from grove.server.idle import Clients


def clients_router(clients: Clients) -> APIRouter:
    """`/api/service`: the activity `grove status` shows; `/api/presence/stream`: held open by a
    client that may sit idle between requests (a chat), which keeps the service up meanwhile."""
    router = APIRouter()

    @router.get("/api/service")
    def service() -> dict[str, Any]:
        return clients.activity()

    @router.get("/api/presence/stream")
    async def presence() -> EventSourceResponse:
        async def held() -> AsyncIterator[bytes]:
            yield ServerSentEvent(event="held", data="{}").encode()
            # Never set: EventSourceResponse ends the stream when its client leaves, or the
            # service stops.
            await asyncio.Event().wait()

        return EventSourceResponse(held())

    return router
