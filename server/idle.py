"""The service's clients as its idle stop sees them: requests open now (a chat holds its presence
stream open), requests served, and since when none was open; and the stop itself.

A service a command started (`[service] autostart`) stops after `[service] idle_stop_s` with no
request open, none made, and no turn or batch running; `grove status` shows where it stands.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from starlette.types import ASGIApp, Receive, Scope, Send

from grove.server.wire import OBSERVER_HEADER

UNCOUNTED_PATHS = frozenset({"/healthz"})  # nor are an observer's requests (wire.py)
MAX_CHECK_EVERY_S = 5.0


def nothing_running() -> int:
    return 0


@dataclass
class Clients:
    """Requests open now, requests served, when the last one ended (monotonic); `running`
    counts the turns and batches under way (create_app tells it how)."""

    open: int = 0
    served: int = 0
    last_seen: float = field(default_factory=time.monotonic)
    running: Callable[[], int] = nothing_running

    def idle_s(self) -> float:
        """Seconds with no request open (0 while one is)."""
        return 0.0 if self.open else time.monotonic() - self.last_seen

    def activity(self) -> dict[str, Any]:
        """What `grove status` shows: clients (requests open), requests served, seconds idle,
        turns and batches running."""
        return {
            "clients": self.open,
            "requests": self.served,
            "idle_s": round(self.idle_s(), 1),
            "running": self.running(),
        }


def counts(scope: Scope) -> bool:
    """Whether the request is a client's: not /healthz, nor an observer's."""
    observer = OBSERVER_HEADER.encode()
    return scope["path"] not in UNCOUNTED_PATHS and all(
        name != observer for name, _ in scope["headers"]
    )


class ClientCount:
    """Counts each request (a stream until it ends) as a client while it is open."""

    def __init__(self, app: ASGIApp, clients: Clients) -> None:
        self.app = app
        self.clients = clients

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not counts(scope):
            await self.app(scope, receive, send)
            return
        self.clients.open += 1
        self.clients.served += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.clients.open -= 1
            self.clients.last_seen = time.monotonic()


class Stoppable(Protocol):
    should_exit: bool


async def stop_when_idle(server: Stoppable, clients: Clients, idle_stop_s: float) -> None:
    """Stop `server` once it has had no client and nothing running for `idle_stop_s`; time
    with a turn or batch running counts as time with a client."""
    check_every = min(MAX_CHECK_EVERY_S, idle_stop_s / 4)
    while not server.should_exit:
        await asyncio.sleep(check_every)
        if clients.idle_s() < idle_stop_s:
            continue
        if await asyncio.to_thread(clients.running):
            clients.last_seen = time.monotonic()
            continue
        if clients.idle_s() >= idle_stop_s:  # no request came while `running` was asked
            sys.stderr.write(
                f"Stopping: no client and nothing running for {idle_stop_s:g} s "
                "([service] idle_stop_s)\n"
            )
            server.should_exit = True
