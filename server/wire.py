"""HTTP/1.1 from the service's clients to the service, on the standard library's http.client:
a command imports it in milliseconds where httpx takes a tenth of a second, which is most of
what a `grove run` through a service costs. Kept-alive connections, one per request at a time.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode, urlsplit

from grove.server.answers import CONNECT_TIMEOUT_S, Answer, Streamed
from grove.supervisor.bridge import bridged

if TYPE_CHECKING:
    from grove.server.wire_async import LoopWire

REQUEST_TIMEOUT_S = 3700.0  # an answer may wait long: a command, a turn's wait
# What a request that got no answer raises: refused, reset, timed out, cut off.
NO_ANSWER = (OSError, http.client.HTTPException)
# A request with this header only looks (`grove status`): the service does not count it as a
# client's, which keeps it from stopping for idleness (server/idle.py).
OBSERVER_HEADER = "x-grove-observer"


def query(params: dict[str, Any] | None) -> str:
    """`?a=1&b=true&c=x&c=y` (true and false as JSON writes them, a list as its items), or
    nothing."""
    if not params:
        return ""
    shown = {k: json.dumps(v) if isinstance(v, bool) else v for k, v in params.items()}
    return "?" + urlencode(shown, doseq=True)


class Wire:
    """Requests to the service at `url` with `headers` on each."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        parts = urlsplit(url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self.headers = headers
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self._loop_wire: LoopWire | None = None

    def _bridged(self) -> LoopWire:
        """The requests of an AsyncGrove's calls (server/wire_async.py)."""
        if self._loop_wire is None:
            from grove.server.wire_async import LoopWire

            self._loop_wire = LoopWire(f"http://{self.host}:{self.port}", self.headers)
        return self._loop_wire

    def _connection(self) -> http.client.HTTPConnection:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        return http.client.HTTPConnection(self.host, self.port, timeout=CONNECT_TIMEOUT_S)

    def _send(
        self,
        connection: http.client.HTTPConnection,
        method: str,
        path: str,
        body: bytes | None,
        content_type: str | None,
        timeout_s: float | None,
    ) -> http.client.HTTPResponse:
        headers = {**self.headers, **({"content-type": content_type} if content_type else {})}
        if connection.sock is None:
            connection.connect()
        assert connection.sock is not None
        connection.sock.settimeout(timeout_s)
        connection.request(method, path, body=body, headers=headers)
        return connection.getresponse()

    @staticmethod
    def _body(
        payload: dict[str, Any] | None, content: bytes | None
    ) -> tuple[bytes | None, str | None]:
        if content is not None:
            return content, "application/octet-stream"
        if payload is not None:
            return json.dumps(payload).encode(), "application/json"
        return None, None

    def request(
        self,
        method: str,
        path: str,
        payload: dict[str, Any] | None = None,
        *,
        params: dict[str, Any] | None = None,
        content: bytes | None = None,
        timeout_s: float = REQUEST_TIMEOUT_S,
    ) -> Answer:
        """One request and its whole answer; a kept-alive connection that the service closed
        meanwhile is opened again once."""
        body, content_type = self._body(payload, content)
        if bridged():
            headers = {"content-type": content_type} if content_type else {}
            return self._bridged().request(method, path + query(params), body, headers, timeout_s)
        for attempt in (1, 2):
            connection = self._connection()
            reused = connection.sock is not None
            try:
                response = self._send(
                    connection, method, path + query(params), body, content_type, timeout_s
                )
                answer = Answer(response.status, response.read())
            except NO_ANSWER:
                connection.close()
                if reused and attempt == 1:
                    continue  # it had gone stale while idle
                raise
            if response.will_close:
                connection.close()
            else:
                with self._lock:
                    self._idle.append(connection)
            return answer
        raise AssertionError("unreachable")

    @contextmanager
    def stream(
        self,
        method: str,
        path: str,
        payload: dict[str, Any] | None = None,
        *,
        params: dict[str, Any] | None = None,
    ) -> Iterator[Streamed]:
        """A request whose answer is read as it comes (no read timeout: a stream lasts as long
        as what it follows), on a connection of its own, closed at the end."""
        body, content_type = self._body(payload, content=None)
        if bridged():
            headers = {"content-type": content_type} if content_type else {}
            with self._bridged().stream(method, path + query(params), body, headers) as response:
                yield response
            return
        connection = http.client.HTTPConnection(self.host, self.port, timeout=CONNECT_TIMEOUT_S)
        try:
            yield self._send(connection, method, path + query(params), body, content_type, None)
        finally:
            connection.close()

    def close(self) -> None:
        if self._loop_wire is not None and bridged():
            self._loop_wire.close()
        with self._lock:
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()


class HeldStream:
    """A GET of `path` held open in a thread of its own, its answer read and dropped, until
    `close`: how a client that may sit idle between requests tells the service it is there."""

    def __init__(self, wire: Wire, path: str) -> None:
        self._connection = http.client.HTTPConnection(
            wire.host, wire.port, timeout=CONNECT_TIMEOUT_S
        )
        self._lock = threading.Lock()
        self._closed = False
        holding = threading.Thread(
            target=self._hold, args=(path, wire.headers), name="grove-held-stream", daemon=True
        )
        holding.start()

    def _hold(self, path: str, headers: dict[str, str]) -> None:
        try:
            with self._lock:
                if self._closed:
                    return
                self._connection.connect()
                assert self._connection.sock is not None
                self._connection.sock.settimeout(None)  # keep-alives come every 15 s
            self._connection.request("GET", path, headers=headers)
            response = self._connection.getresponse()
            while response.read1(4096):
                pass
        except NO_ANSWER:  # closed under it, or the service went away
            pass
        finally:
            self._connection.close()

    def close(self) -> None:
        """Let go of the stream: its thread's read ends, and the thread closes the connection."""
        with self._lock:
            self._closed = True
            if self._connection.sock is not None:
                with contextlib.suppress(OSError):
                    self._connection.sock.shutdown(socket.SHUT_RDWR)


def sse_events(response: Streamed) -> Iterator[tuple[str, str]]:
    """`(event, data)` of a Server-Sent Events answer, as they arrive."""
    event, data = "message", list[str]()
    while raw := response.readline():
        line = raw.decode("utf-8").rstrip("\r\n")
        if not line:
            if data:
                yield event, "\n".join(data)
            event, data = "message", []
        elif line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
        elif line.startswith(":"):  # a keep-alive: a reader may look around
            yield "comment", line[1:].strip()
    if data:
        yield event, "\n".join(data)


def answers(url: str, timeout_s: float) -> bool:
    """Whether a service answers /healthz at `url` within `timeout_s`."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=timeout_s)
    try:
        connection.request("GET", "/healthz")
        return connection.getresponse().status == 200
    except NO_ANSWER:
        return False
    finally:
        connection.close()
