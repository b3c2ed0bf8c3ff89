"""The service's clients' HTTP (server/wire.py): query strings as the API reads them, and
Server-Sent Events read line by line, keep-alives included, whatever the line endings."""

from __future__ import annotations

import http.client
import io
from typing import cast

from server.wire import query, sse_events


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
