"""What every simulated API module provides (`SimulatedAPI`), and the pieces they share: frames,
complete replies, problems, key checks, content text, JSON and SSE encoding, vendor-style ids.

No vendor's own field names live here (content parts' `type` and `text` are common to several);
no network I/O either (server.py does that).
"""

from __future__ import annotations

import hmac
import json
import random
import string
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from grove.providers.errors import GroveError
from grove.providers.ratelimit import Admission
from grove.simulator.script import Inbound, Plan

Problem = Literal[
    "missing_key",
    "bad_key",
    "bad_json",
    "invalid_request",
    "not_found",
    "request_too_large",
    "method_not_allowed",
    "rate_limited",
    "server_error",
    "unavailable",
    "overloaded",
    "context_length",
    "model_not_found",
    "unsupported_value",
    "unsupported_parameter",
]
FrameRole = Literal["meta", "content", "terminal"]
FAULT_PROBLEMS: dict[str, Problem] = {
    "429": "rate_limited",
    "500": "server_error",
    "503": "unavailable",
    "529": "overloaded",
}
SSE_CONTENT_TYPE = "text/event-stream; charset=utf-8"
JSON_CONTENT_TYPE = "application/json"
BINARY_CONTENT_TYPE = "application/octet-stream"
ALPHANUMERIC = string.ascii_letters + string.digits


@dataclass(frozen=True, slots=True)
class Frame:
    """One streamed event. `content` frames are tokens (paced, counted by `after=N`);
    `terminal` frames are the API's completion signal, never sent by a disconnect."""

    data: bytes
    role: FrameRole = "meta"


@dataclass(frozen=True, kw_only=True, slots=True)
class Reply:
    """A complete, non-streamed answer: `body` as JSON, or `raw` bytes (a file, JSONL results)
    of `content_type`."""

    status: int
    body: dict[str, Any]
    headers: tuple[tuple[str, str], ...] = field(default=())
    raw: bytes | None = None
    content_type: str = JSON_CONTENT_TYPE


class InvalidRequest(GroveError):
    """The request body is not what the API accepts; the text is the API's message, `problem`
    the kind of refusal (a 400 unless it names another status)."""

    def __init__(
        self, message: str, *, param: str | None = None, problem: Problem = "invalid_request"
    ) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.problem = problem


def objects(value: object, where: str) -> list[dict[str, Any]]:
    """`value` as a list of JSON objects (absent: empty), or `InvalidRequest` naming `where`."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidRequest(f"{where}: Input should be a valid list")
    for index, item in enumerate(value):
        if not isinstance(item, dict):
            raise InvalidRequest(f"{where}.{index}: Input should be a valid dictionary")
    return value


def content_text(content: object, part_types: tuple[str, ...] = ("text",)) -> str:
    """A string as it is, or the `text` of the parts of a list whose `type` is one of
    `part_types`, a line each (Anthropic and OpenAI content); anything else has no text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, dict) and part.get("type") in part_types
        )
    return ""


class SimulatedAPI(Protocol):
    """One vendor API as the simulator speaks it."""

    name: str

    def handles(self, path: str) -> bool:
        """Whether `path` (without query) is one of this API's endpoints."""
        ...

    def authenticate(
        self, headers: dict[str, str], query: dict[str, str], key: str
    ) -> Problem | None:
        """None when the request carries `key`; otherwise the auth problem."""
        ...

    def read(self, path: str, query: dict[str, str], body: dict[str, Any]) -> Inbound:
        """Raises `InvalidRequest` for a body the real API would refuse."""
        ...

    def error(
        self,
        problem: Problem,
        message: str | None = None,
        *,
        param: str | None = None,
        retry_after: float | None = None,
    ) -> Reply: ...

    def response_headers(self) -> tuple[tuple[str, str], ...]:
        """Headers every answer carries (request ids and the like)."""
        ...

    def context_overflow(self, tokens: int, window: int) -> Reply:
        """The API's own answer to a request over the model's context window."""
        ...

    def rate_limit_headers(self, admission: Admission) -> tuple[tuple[str, str], ...]:
        """The API's own headers telling what is left of its rate limits."""
        ...

    def frames(self, plan: Plan, inbound: Inbound) -> list[Frame]:
        """The whole stream for `plan`, in order."""
        ...

    def error_frames(self, inbound: Inbound) -> list[Frame]:
        """The in-stream error an HTTP 200 stream carries before any content."""
        ...

    def body(self, plan: Plan, inbound: Inbound) -> dict[str, Any]:
        """The non-streamed JSON answer for `plan`."""
        ...


def dump(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def named_event(event: str, payload: object, role: FrameRole = "meta") -> Frame:
    """`event: NAME` + `data: JSON`, as the Anthropic and Responses APIs frame them."""
    return Frame(b"event: " + event.encode("ascii") + b"\ndata: " + dump(payload) + b"\n\n", role)


def data_event(payload: object, role: FrameRole = "meta", *, crlf: bool = False) -> Frame:
    """A `data:`-only event (Chat Completions; Gemini with CRLF line ends)."""
    end = b"\r\n\r\n" if crlf else b"\n\n"
    return Frame(b"data: " + dump(payload) + end, role)


def random_id(prefix: str, length: int, alphabet: str = ALPHANUMERIC) -> str:
    """A vendor-looking id; not a secret, so the fast non-cryptographic generator serves."""
    return prefix + "".join(random.choices(alphabet, k=length))


def bearer_token(headers: dict[str, str]) -> str | None:
    """The key of an `Authorization: Bearer KEY` header, or None without one."""
    authorization = headers.get("authorization")
    if authorization is None or not authorization.startswith("Bearer "):
        return None
    return authorization.removeprefix("Bearer ").strip()


def key_problem(given: str | None, key: str) -> Problem | None:
    """None when the request's key `given` is `key` (compared in constant time)."""
    if given is None:
        return "missing_key"
    return None if hmac.compare_digest(given.encode(), key.encode()) else "bad_key"


def retry_after_headers(retry_after: float | None) -> tuple[tuple[str, str], ...]:
    if retry_after is None:
        return ()
    return (
        ("retry-after", format_seconds(retry_after)),
        ("retry-after-ms", str(round(retry_after * 1000))),
    )


def format_seconds(seconds: float) -> str:
    """`2` for 2.0, `0.5` for 0.5: what a retry-after header or a Duration carries."""
    return f"{seconds:.3f}".rstrip("0").rstrip(".")
