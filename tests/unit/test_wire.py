"""The service's clients' HTTP (server/wire.py): query strings as the API reads them,
Server-Sent Events read line by line, keep-alives included, whatever the line endings, and
an asyncio caller's client closed on its own loop (server/wire_async.py)."""

from __future__ import annotations

import asyncio
import gc
import http.client
import http.server
import io
import threading
import warnings
from collections.abc import Iterator
from typing import cast

import httpx
import pytest

from grove.server.wire import query, sse_events
from grove.server.wire_async import LoopWire
from grove.supervisor.bridge import bridge


def events_of(raw: bytes) -> list[tuple[str, str]]:
    return list(sse_events(cast(http.client.HTTPResponse, io.BytesIO(raw))))


def test_a_query_says_true_and_false_as_json_does() -> None:
    assert query(None) == "" and query({}) == ""
    assert query({"include_ended": False, "after": 3}) == "?include_ended=false&after=3"
    assert query({"agent": "a b/c"}) == "?agent=a+b%2Fc"


def test_events_come_whole_with_their_names_and_keep_alives() -> None:
    raw = (
        b'event: delta\r\ndata: {"kind": "text"}\r\n\r\n'
        b": ping - 2026\n\n"
        b"data: first\ndata: second\n\n"
        b"id: 7\nevent: end\ndata: {}"
    )
    assert events_of(raw) == [
        ("delta", '{"kind": "text"}'),
        ("comment", "ping - 2026"),
        ("message", "first\nsecond"),
        ("end", "{}"),
    ]


class Ok(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # kept alive: the client holds a connection afterwards

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("content-length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def served() -> Iterator[str]:
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), Ok) as server:
        serving = threading.Thread(target=server.serve_forever)
        serving.start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}"
        finally:
            server.shutdown()
            serving.join()


async def settled() -> None:
    """Once the loop's other tasks are done."""
    await asyncio.gather(*asyncio.all_tasks() - {asyncio.current_task()})


def test_each_loops_client_is_closed_on_that_loop(served: str) -> None:
    """One wire, used from two `asyncio.run`s in turn and from a loop of another thread that
    goes on: each loop's client is closed on its loop (as the loop ends, or once the wire
    moved on to another), none is left for the collector to warn about."""
    wire = LoopWire(served, {})
    clients: list[httpx.AsyncClient] = []

    async def ask() -> int:
        answer = await bridge(wire.request, "GET", "/", None, {}, 10.0)
        clients.append(wire.client())
        return answer.status

    other = asyncio.new_event_loop()
    going_on = threading.Thread(target=other.run_forever)
    going_on.start()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert asyncio.run(ask()) == asyncio.run(ask()) == 200
        assert [client.is_closed for client in clients] == [True, True]
        assert asyncio.run_coroutine_threadsafe(ask(), other).result(10) == 200
        assert asyncio.run(ask()) == 200  # the other loop's client, let go, is closed there
        asyncio.run_coroutine_threadsafe(settled(), other).result(10)
        other.call_soon_threadsafe(other.stop)
        going_on.join()
        other.close()
        assert [client.is_closed for client in clients] == [True] * 4
        del clients[:]
        gc.collect()
    assert [str(warning.message) for warning in caught] == []
