"""An incremental Server-Sent Events decoder: bytes in, events out, no I/O.

Split-safe at any byte (inside UTF-8 sequences and CRLF pairs); CR, LF and CRLF line ends;
comments; multi-line data; no line-length cap. Follows the WHATWG event-stream rules, except
that `flush()` at a clean end of body dispatches a last event lacking its blank line.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass

_BOM = "\ufeff"
_Utf8Decoder = codecs.getincrementaldecoder("utf-8")


@dataclass(frozen=True, slots=True)
class ServerSentEvent:
    event: str = "message"
    data: str = ""
    id: str | None = None
    retry: int | None = None


class SSEDecoder:
    """Feed `decode(chunk)` the body as it arrives, then call `flush()` once at its end.

    Never raises: malformed UTF-8 is replaced with U+FFFD, unknown fields are ignored.
    The body is decoded to text once, chunk by chunk, as the standard says; lines are then
    split and read with str methods (the per-line work is what costs, so it stays small).
    """

    __slots__ = (
        "_data",
        "_event",
        "_id",
        "_partial",
        "_retry",
        "_skip_lf",
        "_started",
        "_utf8",
    )

    def __init__(self) -> None:
        self._utf8 = _Utf8Decoder("replace")  # keeps a split UTF-8 sequence for the next chunk
        self._partial: list[str] = []  # an unterminated line, in pieces
        self._skip_lf = False  # the last text ended in CR: a leading LF belongs to it
        self._started = False  # the byte-order mark is only stripped at the very start
        self._data: list[str] = []
        self._event = ""
        self._id: str | None = None
        self._retry: int | None = None

    def decode(self, chunk: bytes) -> list[ServerSentEvent]:
        return self._text(self._utf8.decode(chunk))

    def flush(self) -> list[ServerSentEvent]:
        """End of body: an unterminated last line and event are still dispatched."""
        events = self._text(self._utf8.decode(b"", final=True))
        lines = ["".join(self._partial)] if self._partial else []
        self._partial = []
        self._skip_lf = False
        return events + self._lines([*lines, ""])

    def _text(self, text: str) -> list[ServerSentEvent]:
        if not text:
            return []
        if self._skip_lf:
            self._skip_lf = False
            if text[0] == "\n":
                text = text[1:]
                if not text:
                    return []
        if "\r" in text:
            self._skip_lf = text[-1] == "\r"
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        lines = text.split("\n")
        if len(lines) == 1:
            self._partial.append(text)
            return []
        if self._partial:
            self._partial.append(lines[0])
            lines[0] = "".join(self._partial)
            self._partial = []
        tail = lines.pop()
        if tail:
            self._partial.append(tail)
        return self._lines(lines)

    def _lines(self, lines: list[str]) -> list[ServerSentEvent]:
        if not self._started and lines:
            self._started = True
            lines[0] = lines[0].removeprefix(_BOM)
        events: list[ServerSentEvent] = []
        data = self._data
        event = self._event
        for line in lines:
            if not line:
                if data:
                    text = data[0] if len(data) == 1 else "\n".join(data)
                    events.append(ServerSentEvent(event or "message", text, self._id, self._retry))
                    data = []
                event = ""
                continue
            # A comment (":...") has the empty name and so matches no field below.
            name, _, value = line.partition(":")
            if value[:1] == " ":
                value = value[1:]
            if name == "data":
                data.append(value)
            elif name == "event":
                event = value
            elif name == "id":
                if "\0" not in value:
                    self._id = value
            elif name == "retry" and value.isascii() and value.isdigit():
                self._retry = int(value)
        self._data = data
        self._event = event
        return events
