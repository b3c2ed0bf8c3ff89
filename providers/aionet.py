"""`AsyncioTransport`: httpx's transport with httpcore's network I/O on plain asyncio streams.

httpcore reaches asyncio through anyio by default, a quarter of a host's CPU when it streams
hundreds of responses; this backend skips that layer, and a read's time limit costs no timer of
its own (`ReadDeadline`). Only socket I/O lives here, no HTTP.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Iterable
from typing import Any

import httpcore
import httpx

# httpx's own defaults (httpx.Limits()): the pool behaves as a stock client's would.
_LIMITS = httpx.Limits()
_READ_LIMIT = 1 << 20

SocketOption = (
    tuple[int, int, int] | tuple[int, int, bytes | bytearray] | tuple[int, int, None, int]
)


class ReadDeadline:
    """The time limit of a connection's reads without a timer for each: a streamed reply is
    read an event at a time, and `asyncio.timeout` around each read (about 4 us: a timer
    scheduled and cancelled) cost a 46-event turn about 0.2 ms. Each read moves one
    deadline; the connection's one timer, when it comes due before the deadline, is set again
    for it, and when a read outlives it, fails that read with `TimeoutError`."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader
        self._loop = asyncio.get_running_loop()
        self._deadline: float | None = None  # while a read waits
        self._timer: asyncio.TimerHandle | None = None

    def start(self, timeout: float) -> None:
        """A read begins that may take `timeout` seconds."""
        self._deadline = deadline = self._loop.time() + timeout
        if self._timer is not None and self._timer.when() > deadline:  # a shorter limit
            self._timer.cancel()
            self._timer = None
        if self._timer is None:
            self._timer = self._loop.call_at(deadline, self._due)

    def stop(self) -> None:
        """The read ended: no limit until the next one (the timer lapses when it comes)."""
        self._deadline = None

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _due(self) -> None:
        self._timer = None
        if self._deadline is None:
            return
        if self._loop.time() < self._deadline:  # reads since moved it on
            self._timer = self._loop.call_at(self._deadline, self._due)
            return
        self._reader.set_exception(TimeoutError())  # the waiting read raises it


class AsyncioStream(httpcore.AsyncNetworkStream):
    """One connection; OS and timeout errors become httpcore's, which httpx maps to its own."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._deadline = ReadDeadline(reader)

    # The `timeout` parameters are httpcore's interface (ASYNC109 would have them gone).
    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:  # noqa: ASYNC109
        if timeout is not None:
            self._deadline.start(timeout)
        try:
            return await self._reader.read(max_bytes)
        except TimeoutError as exc:
            raise httpcore.ReadTimeout("timed out reading the response") from exc
        except OSError as exc:
            raise httpcore.ReadError(f"{type(exc).__name__}: {exc}") from exc
        finally:
            self._deadline.stop()

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:  # noqa: ASYNC109
        if not buffer:
            return
        try:
            self._writer.write(buffer)
            async with asyncio.timeout(timeout):
                await self._writer.drain()
        except TimeoutError as exc:
            raise httpcore.WriteTimeout("timed out sending the request") from exc
        except OSError as exc:
            raise httpcore.WriteError(f"{type(exc).__name__}: {exc}") from exc

    async def aclose(self) -> None:
        self._deadline.close()
        self._writer.close()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> AsyncioStream:
        try:
            async with asyncio.timeout(timeout):
                await self._writer.start_tls(ssl_context, server_hostname=server_hostname)
        except TimeoutError as exc:
            self._writer.close()
            raise httpcore.ConnectTimeout("timed out in the TLS handshake") from exc
        except OSError as exc:  # ssl.SSLError included
            self._writer.close()
            raise httpcore.ConnectError(f"{type(exc).__name__}: {exc}") from exc
        return self

    def get_extra_info(self, info: str) -> Any:
        if info == "ssl_object":
            return self._writer.get_extra_info("ssl_object")
        if info == "client_addr":
            return self._writer.get_extra_info("sockname")
        if info == "server_addr":
            return self._writer.get_extra_info("peername")
        if info == "socket":
            return self._writer.get_extra_info("socket")
        if info == "is_readable":
            # An idle connection with bytes waiting or the peer gone cannot be reused. The
            # transport reads eagerly, so look at what it has buffered, not at the socket.
            # A read that timed out left its exception there: not reusable either.
            return (
                self._reader.at_eof()
                or self._reader.exception() is not None
                or bool(getattr(self._reader, "_buffer", b""))
            )
        return None


class AsyncioBackend(httpcore.AsyncNetworkBackend):
    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109
        local_address: str | None = None,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> AsyncioStream:
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_connection(
                    host,
                    port,
                    limit=_READ_LIMIT,
                    local_addr=(local_address, 0) if local_address else None,
                )
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout(f"timed out connecting to {host}:{port}") from exc
        except OSError as exc:
            raise httpcore.ConnectError(f"{type(exc).__name__}: {exc}") from exc
        sock: socket.socket | None = writer.get_extra_info("socket")
        for option in socket_options or ():
            if sock is not None:
                sock.setsockopt(*option)
        return AsyncioStream(reader, writer)

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109
        socket_options: Iterable[SocketOption] | None = None,
    ) -> AsyncioStream:
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_unix_connection(path, limit=_READ_LIMIT)
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout(f"timed out connecting to {path}") from exc
        except OSError as exc:
            raise httpcore.ConnectError(f"{type(exc).__name__}: {exc}") from exc
        return AsyncioStream(reader, writer)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class AsyncioTransport(httpx.AsyncHTTPTransport):
    """A stock `httpx.AsyncHTTPTransport` (HTTP/1.1, httpx's pool limits, its error mapping)
    whose connections run on `AsyncioBackend`."""

    def __init__(self, ssl_context: ssl.SSLContext) -> None:
        super().__init__(verify=ssl_context, limits=_LIMITS)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context,
            max_connections=_LIMITS.max_connections,
            max_keepalive_connections=_LIMITS.max_keepalive_connections,
            keepalive_expiry=_LIMITS.keepalive_expiry,
            network_backend=AsyncioBackend(),
        )
