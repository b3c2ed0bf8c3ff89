"""An incremental Server-Sent Events decoder: bytes in, events out, no I/O.

Split-safe at any byte (inside UTF-8 sequences and CRLF pairs); CR, LF and CRLF line ends;
comments; multi-line data; no line-length cap. Follows the WHATWG event-stream rules, except
that `flush()` at a clean end of body dispatches a last event lacking its blank line.
"""

from __future__ import annotations

from dataclasses import dataclass

_CR = 0x0D
_LF = 0x0A
_BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True, slots=True)
class ServerSentEvent:
    event: str = "message"
    data: str = ""
    id: str | None = None
    retry: int | None = None


class SSEDecoder:
    """Feed `decode(chunk)` the body as it arrives, then call `flush()` once at its end.

    Never raises: malformed UTF-8 is replaced with U+FFFD, unknown fields are ignored.
    """

    __slots__ = ("_data", "_event", "_id", "_partial", "_retry", "_skip_lf", "_started")

    def __init__(self) -> None:
        self._partial: list[bytes] = []  # an unterminated line, in pieces
        self._skip_lf = False  # the last chunk ended in CR: a leading LF belongs to it
        self._started = False  # the byte-order mark is only stripped at the very start
        self._data: list[bytes] = []
        self._event = b""
        self._id: str | None = None
        self._retry: int | None = None

    def decode(self, chunk: bytes) -> list[ServerSentEvent]:
        if not chunk:
            return []
        if self._skip_lf:
            self._skip_lf = False
            if chunk[0] == _LF:
                chunk = chunk[1:]
                if not chunk:
                    return []
        if _LF not in chunk and _CR not in chunk:
            self._partial.append(chunk)
            return []
        if self._partial:
            self._partial.append(chunk)
            chunk = b"".join(self._partial)
            self._partial = []
        lines = chunk.splitlines(keepends=True)
        last = lines[-1]
        if last[-1] not in (_LF, _CR):
            self._partial.append(lines.pop())
        elif last[-1] == _CR:
            self._skip_lf = True
        events: list[ServerSentEvent] = []
        for line in lines:
            self._line(line.rstrip(b"\r\n"), events)
        return events

    def flush(self) -> list[ServerSentEvent]:
        """End of body: an unterminated last line and event are still dispatched."""
        events: list[ServerSentEvent] = []
        if self._partial:
            line = b"".join(self._partial)
            self._partial = []
            self._line(line, events)
        self._dispatch(events)
        self._skip_lf = False
        return events

    def _line(self, line: bytes, events: list[ServerSentEvent]) -> None:
        if not self._started:
            self._started = True
            if line.startswith(_BOM):
                line = line[len(_BOM) :]
        if not line:
            self._dispatch(events)
            return
        if line[0] == 0x3A:  # ":" comment
            return
        name, colon, value = line.partition(b":")
        if colon and value[:1] == b" ":
            value = value[1:]
        if name == b"data":
            self._data.append(value)
        elif name == b"event":
            self._event = value
        elif name == b"id":
            if b"\x00" not in value:
                self._id = value.decode("utf-8", "replace")
        elif name == b"retry" and value.isdigit():
            self._retry = int(value)

    def _dispatch(self, events: list[ServerSentEvent]) -> None:
        if not self._data:
            self._event = b""
            return
        data = self._data[0] if len(self._data) == 1 else b"\n".join(self._data)
        events.append(
            ServerSentEvent(
                event=self._event.decode("utf-8", "replace") if self._event else "message",
                data=data.decode("utf-8", "replace"),
                id=self._id,
                retry=self._retry,
            )
        )
        self._data = []
        self._event = b""
