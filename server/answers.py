"""What the service's clients get back, on either wire (server/wire.py on http.client,
server/wire_async.py on httpx for an AsyncGrove): whole answers and answers read as they come.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

CONNECT_TIMEOUT_S = 30.0


class Streamed(Protocol):
    """An answer read as it comes: http.client's, or server/wire_async.py's."""

    status: int

    def read(self) -> bytes: ...

    def readline(self) -> bytes: ...


class Answer:
    """A whole answer: its status and body."""

    def __init__(self, status: int, body: bytes) -> None:
        self.status = status
        self.body = body

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")
