"""A minimal HTTP/1.1 server side over asyncio streams: read one request (Content-Length or
chunked body), write a head, a sized body or chunks. No routing and no API knowledge here.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from http import HTTPStatus
from urllib.parse import parse_qsl, urlsplit

from grove.providers.errors import GroveError

MAX_HEAD_BYTES = 64 * 1024
# The largest request a vendor takes: an Anthropic message batch (OpenAI's batch file: 200 MB).
MAX_BODY_BYTES = 256 * 1024 * 1024


class MalformedRequest(GroveError):
    """The bytes are not an HTTP/1.1 request this server can read; `status` says why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True, kw_only=True, slots=True)
class HTTPRequest:
    method: str
    path: str
    query: dict[str, str] = field(repr=False)
    headers: dict[str, str] = field(repr=False)
    body: bytes = field(repr=False)

    @property
    def keep_alive(self) -> bool:
        return "close" not in self.headers.get("connection", "").lower()


async def read_request(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> HTTPRequest | None:
    """The next request on a connection, or None when the client closed it between requests."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if exc.partial.strip():
            raise MalformedRequest(400, "the connection closed inside a request head") from exc
        return None
    except asyncio.LimitOverrunError as exc:
        raise MalformedRequest(431, "request head too large") from exc
    lines = head[:-4].decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise MalformedRequest(400, f"not an HTTP/1.1 request line: {lines[0][:80]!r}")
    method, target, _ = parts
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon or not name or name != name.strip():
            raise MalformedRequest(400, f"malformed header line: {line[:80]!r}")
        headers[name.lower()] = value.strip()
    if headers.get("expect", "").lower() == "100-continue":
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    body = await _read_body(reader, headers)
    url = urlsplit(target)
    return HTTPRequest(
        method=method,
        path=url.path,
        query=dict(parse_qsl(url.query)),
        headers=headers,
        body=body,
    )


async def _read_body(reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
    try:
        if "chunked" in headers.get("transfer-encoding", "").lower():
            return await _read_chunked(reader)
        length_text = headers.get("content-length", "0")
        if not length_text.isdigit():
            raise MalformedRequest(400, f"bad Content-Length {length_text[:40]!r}")
        length = int(length_text)
        if length > MAX_BODY_BYTES:
            raise MalformedRequest(413, f"request body larger than {MAX_BODY_BYTES} bytes")
        return await reader.readexactly(length)
    except asyncio.IncompleteReadError as exc:
        raise MalformedRequest(400, "the connection closed inside a request body") from exc


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    body = bytearray()
    while True:
        size_line = (await reader.readuntil(b"\r\n")).split(b";", 1)[0].strip()
        try:
            size = int(size_line, 16)
        except ValueError as exc:
            raise MalformedRequest(400, f"bad chunk size {size_line[:20]!r}") from exc
        if size == 0:
            while (await reader.readuntil(b"\r\n")) != b"\r\n":
                pass  # trailer fields, ignored
            return bytes(body)
        if len(body) + size > MAX_BODY_BYTES:
            raise MalformedRequest(413, f"request body larger than {MAX_BODY_BYTES} bytes")
        body += await reader.readexactly(size)
        if await reader.readexactly(2) != b"\r\n":
            raise MalformedRequest(400, "a chunk does not end with CRLF")


def response_head(status: int, headers: list[tuple[str, str]], *, keep_alive: bool) -> bytes:
    lines = [f"HTTP/1.1 {status} {reason_phrase(status)}"]
    lines += [f"{name}: {value}" for name, value in headers]
    lines.append("connection: keep-alive" if keep_alive else "connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def reason_phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Overloaded" if status == 529 else "Unknown"


def sized_response(
    status: int, headers: list[tuple[str, str]], body: bytes, *, keep_alive: bool
) -> bytes:
    head = response_head(
        status, [*headers, ("content-length", str(len(body)))], keep_alive=keep_alive
    )
    return head + body


def chunk(payload: bytes) -> bytes:
    return b"%X\r\n%s\r\n" % (len(payload), payload)


LAST_CHUNK = b"0\r\n\r\n"
