"""The same requests as server/wire.py for a call an AsyncGrove makes: on httpx's async client,
awaited on the caller's event loop (supervisor/bridge.py), so waiting on the service blocks
nothing; answers read as `Wire`'s are."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Iterator
from contextlib import contextmanager

import httpx

from grove.server.answers import CONNECT_TIMEOUT_S, Answer
from grove.supervisor.bridge import awaited


class BridgedResponse:
    """A streamed answer read as `sse_events` reads an http.client response."""

    def __init__(self, response: httpx.Response) -> None:
        self.status = response.status_code
        self._response = response
        self._chunks = response.aiter_bytes()
        self._buffer = b""

    def read(self) -> bytes:
        return awaited(self._response.aread())

    def readline(self) -> bytes:
        """The next line with its newline; b"" at the end."""
        while b"\n" not in self._buffer:
            chunk = awaited(anext(self._chunks, b""))
            if not chunk:
                line, self._buffer = self._buffer, b""
                return line
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line + b"\n"


async def held(client: httpx.AsyncClient) -> AsyncGenerator[None, None]:
    """Keeps `client` until asyncio closes this generator on the client's own loop: as the
    loop shuts down (`asyncio.run`'s end), or once it is let go while its loop goes on."""
    try:
        yield
    finally:
        await client.aclose()


class LoopWire:
    """httpx's async client for the running loop (one per loop: a client does not outlive
    the loop it was made on, it is closed there)."""

    def __init__(self, base_url: str, headers: dict[str, str]) -> None:
        self.base_url = base_url
        self.headers = headers
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: httpx.AsyncClient | None = None
        self._holder: AsyncGenerator[None, None] | None = None

    def client(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            limits = httpx.Limits(max_connections=None, max_keepalive_connections=100)
            timeout = httpx.Timeout(None, connect=CONNECT_TIMEOUT_S)
            self._client = httpx.AsyncClient(
                base_url=self.base_url, headers=self.headers, limits=limits, timeout=timeout
            )
            self._loop = loop
            self._holder = held(self._client)  # the last loop's, let go: closed on that loop
            awaited(anext(self._holder))
        return self._client

    def request(
        self, method: str, path: str, body: bytes | None, headers: dict[str, str], timeout_s: float
    ) -> Answer:
        client = self.client()
        try:
            response = awaited(
                client.request(method, path, content=body, headers=headers, timeout=timeout_s)
            )
        except httpx.TransportError as exc:  # as Wire's callers expect no answer to look
            raise ConnectionError(str(exc) or type(exc).__name__) from exc
        return Answer(response.status_code, response.content)

    @contextmanager
    def stream(
        self, method: str, path: str, body: bytes | None, headers: dict[str, str]
    ) -> Iterator[BridgedResponse]:
        client = self.client()
        request = client.build_request(method, path, content=body, headers=headers)
        try:
            response = awaited(client.send(request, stream=True))
        except httpx.TransportError as exc:
            raise ConnectionError(str(exc) or type(exc).__name__) from exc
        try:
            yield BridgedResponse(response)
        finally:
            awaited(response.aclose())

    def close(self) -> None:
        """Closes the client: here when on its loop (a call of an AsyncGrove's close), else
        on its own loop as that goes on or shuts down."""
        if self._holder is not None and self._loop is asyncio.get_running_loop():
            awaited(self._holder.aclose())
        self._client = self._loop = self._holder = None
