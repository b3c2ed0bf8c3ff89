"""The HTTP API (FastAPI) over one `Grove`: its middleware and its routers (server/routes/, one
per resource), assembled here; nothing else lives here.

Every route but /healthz needs the bearer token (a header, or `?token=` for the dashboard's
own page and event streams, which browsers cannot give headers to); server/gates.py checks
that, the Host, body sizes and open streams. Streams wait on the event loop, never in a thread.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from grove.providers.errors import GroveError
from grove.server.batches import MAX_BATCH_BYTES, Batches
from grove.server.feeds import EventFeed
from grove.server.gates import BearerTokenGate, BodyLimit, HostGate, StreamLimit
from grove.server.idle import ClientCount, Clients
from grove.server.routes.agents import agents_router
from grove.server.routes.batches import batch_router
from grove.server.routes.events import events_router
from grove.server.routes.presence import clients_router
from grove.server.routes.service import service_router
from grove.server.routes.sessions import sessions_router
from grove.server.routes.tree import tree_router
from grove.server.routes.turns import turns_router
from grove.server.routes.usage import usage_router
from grove.server.routes.worktrees import worktrees_router
from grove.supervisor.api import Grove
from grove.supervisor.async_api import AsyncGrove
from grove.supervisor.store import open_store


def create_app(
    grove: Grove, token: str, batch_dir: Path, clients: Clients | None = None
) -> FastAPI:
    """The API over a started `grove`; batches write their records under `batch_dir`; its
    requests are counted in `clients` (server/idle.py)."""
    aio = AsyncGrove(grove)  # the same Grove, for the routes that wait: nothing blocks the loop
    feed = EventFeed(lambda: open_store(grove.settings.store))
    batches = Batches(grove, batch_dir)
    clients = clients or Clients()
    clients.running = lambda: grove.turns_in_flight() + batches.running()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await run_in_threadpool(batches.resume)  # what a restart cut off goes on
        yield
        batches.closing.set()
        await feed.close()

    app = FastAPI(
        title="Grove",
        summary="Many LLM agents as actors: roots, forks, advisors, batches, budgets.",
        version="1",
        lifespan=lifespan,
    )
    service = grove.settings.service
    # The last added runs first: Host, the token, open streams, body sizes, then the count.
    app.add_middleware(ClientCount, clients=clients)
    app.add_middleware(BodyLimit, limits={("POST", "/api/batches"): MAX_BATCH_BYTES})
    app.add_middleware(StreamLimit, per_token=service.max_streams)
    app.add_middleware(BearerTokenGate, token=token)
    app.add_middleware(HostGate, allowed=service.allowed_hosts)
    app.exception_handler(GroveError)(grove_error)
    for router in (
        batch_router(batches),
        clients_router(clients),
        service_router(grove),
        tree_router(grove, feed),
        agents_router(grove),
        turns_router(grove, aio),
        sessions_router(grove),
        usage_router(grove),
        events_router(grove, feed),
        worktrees_router(grove),
    ):
        app.include_router(router)
    return app


async def grove_error(request: Request, exc: GroveError) -> JSONResponse:
    """Grove's refusals as JSON: 404 for an agent it does not know, else 400."""
    text = str(exc)
    status = 404 if text.startswith(("Unknown agent", "No agent")) else 400
    return JSONResponse({"error": text}, status_code=status)
