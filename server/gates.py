"""The checks every request of the service passes before a route sees it, as plain ASGI (so
streamed answers pass through untouched): its Host, its token, its body's size as it is read,
and for event streams, how many the token has open.

Each refusal is one JSON answer that says what to do: 400, 401, 413 or 429.
"""

from __future__ import annotations

import ipaddress
from collections import Counter
from collections.abc import Iterable

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from grove.server.files import token_matches

OPEN_PATHS = frozenset({"/healthz"})
MAX_JSON_BYTES = 16 * 1024 * 1024  # a prompt at its limit, escaped, with room to spare
LOOPBACK_NAMES = frozenset({"localhost"})
# A command's presence (server/idle.py) is no dashboard stream: its token goes in the header.
HEADER_TOKEN_STREAMS = frozenset({"/api/presence/stream"})


def is_stream(scope: Scope) -> bool:
    """An event stream: GET of a path ending in /stream (the log, the tree, an agent's turn)."""
    return scope["method"] == "GET" and str(scope["path"]).endswith("/stream")


def takes_query_token(scope: Scope) -> bool:
    """The dashboard's page and its event streams, which browsers cannot give headers to."""
    if scope["path"] in HEADER_TOKEN_STREAMS:
        return False
    return scope["method"] == "GET" and (scope["path"] == "/" or is_stream(scope))


async def refuse(scope: Scope, receive: Receive, send: Send, status: int, text: str) -> None:
    headers = {"www-authenticate": "Bearer"} if status == 401 else None
    await JSONResponse({"error": text}, status_code=status, headers=headers)(scope, receive, send)


class HostGate:
    """Answers only requests whose Host names this service: an IP address, `localhost`, or a
    name in `allowed` (`[service] allowed_hosts`). A page on some other name that resolves to
    this machine (DNS rebinding) gets 400."""

    def __init__(self, app: ASGIApp, allowed: Iterable[str] = ()) -> None:
        self.app = app
        self.allowed = {name.lower() for name in allowed}

    def accepts(self, host: str) -> bool:
        host = host.lower()
        if host in self.allowed:
            return True
        name = host[1:].partition("]")[0] if host.startswith("[") else host.rpartition(":")[0]
        name = name or host  # no port given
        if name in LOOPBACK_NAMES or name in self.allowed:
            return True
        try:
            ipaddress.ip_address(name)
        except ValueError:
            return False
        return True

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            host = Request(scope).headers.get("host", "")
            if not self.accepts(host):
                text = (
                    f"Host {host!r} is not a name this Grove is served on; add it to "
                    "[service] allowed_hosts in the config to allow it"
                )
                await refuse(scope, receive, send, 400, text)
                return
        await self.app(scope, receive, send)


def given_token(scope: Scope) -> str | None:
    """The token a request carries: a bearer header, or `?token=` where that is taken."""
    request = Request(scope)
    header = request.headers.get("authorization", "")
    if header.lower().startswith("bearer "):
        return header[7:]
    return request.query_params.get("token") if takes_query_token(scope) else None


class BearerTokenGate:
    """A request without the token gets 401, except on OPEN_PATHS. `?token=` is taken only by
    the dashboard's page and its event streams."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        opened = scope["type"] != "http" or scope["path"] in OPEN_PATHS
        if not opened and not token_matches(given_token(scope), self.token):
            text = "a bearer token is needed: Authorization: Bearer TOKEN"
            await refuse(scope, receive, send, 401, text)
            return
        await self.app(scope, receive, send)


class BodyLimit:
    """A body larger than its route's limit gets 413 at once: a declared Content-Length is
    checked before anything is read, a chunked body as it arrives (nothing past the limit is
    read: `receive` raises the 413 the route answers with). `limits` maps (method, path) to
    a limit; every other body has MAX_JSON_BYTES."""

    def __init__(self, app: ASGIApp, limits: dict[tuple[str, str], int]) -> None:
        self.app = app
        self.limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limits.get((scope["method"], scope["path"]), MAX_JSON_BYTES)
        text = f"the body is over {limit:,} bytes, the limit of {scope['path']}"
        declared = Request(scope).headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            await refuse(scope, receive, send, 413, text)
            return
        read = 0

        async def limited_receive() -> Message:
            nonlocal read
            message = await receive()
            if message["type"] == "http.request":
                read += len(message.get("body", b""))
                if read > limit:
                    raise HTTPException(413, text)
            return message

        await self.app(scope, limited_receive, send)


class StreamLimit:
    """At most `per_token` event streams open at once per token; one more gets 429."""

    def __init__(self, app: ASGIApp, per_token: int) -> None:
        self.app = app
        self.per_token = per_token
        self.open: Counter[str] = Counter()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not is_stream(scope):
            await self.app(scope, receive, send)
            return
        holder = given_token(scope) or ""
        if self.open[holder] >= self.per_token:
            text = (
                f"{self.per_token:,} event streams are open with this token, the limit "
                "([service] max_streams); close one first"
            )
            await refuse(scope, receive, send, 429, text)
            return
        self.open[holder] += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.open[holder] -= 1
            if not self.open[holder]:
                del self.open[holder]
