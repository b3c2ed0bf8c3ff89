"""Gemini `streamGenerateContent?alt=sse` events -> Grove stream events (one parser per attempt).

Each SSE data line is one GenerateContentResponse; only candidate 0 is read. No I/O here and
no request building (request.py); assembly is providers.accumulate's job.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any, Literal

from grove.providers import wirejson
from grove.providers.base import JSONObject, Usage
from grove.providers.errors import ProviderProtocolError, ProviderStreamError
from grove.providers.google import PROVIDER
from grove.providers.google.errors import GoogleError
from grove.providers.sse import ServerSentEvent
from grove.providers.stream_events import (
    Completed,
    ResponseInfo,
    StopReason,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ThinkingSignature,
    ToolCallArguments,
    ToolCallStart,
    UsageUpdate,
)

# `provider_data` of a ThinkingSignature whose signature came on a plain (non-thought) text
# part: the request builder puts it back on that text part.
TEXT_SIGNATURE_DATA: JSONObject = {"gemini_part": "text"}

# One step of a partialArgs jsonPath (RFC 9535 subset): `.name`, `[3]`, `['name']`, `["name"]`.
_PATH_STEP = re.compile(
    r"\.(?P<dot>[^.\[\]]+)|\[(?P<index>\d+)\]"
    r"|\['(?P<single>(?:[^'\\]|\\.)*)'\]|\[\"(?P<double>(?:[^\"\\]|\\.)*)\"\]"
)
_ESCAPE = re.compile(r"\\(.)")


def parse_json_path(path: str) -> list[str | int]:
    """`$.a.b[0]['c d']` -> ["a", "b", 0, "c d"]; ProviderProtocolError for anything else."""
    if not path.startswith("$"):
        raise ProviderProtocolError(f"Gemini partialArgs jsonPath {path!r} does not start with $")
    steps: list[str | int] = []
    position = 1
    while position < len(path):
        match = _PATH_STEP.match(path, position)
        if match is None:
            raise ProviderProtocolError(f"Gemini partialArgs jsonPath {path!r} is not understood")
        if match["index"] is not None:
            steps.append(int(match["index"]))
        else:
            name = match["dot"] or match["single"] or match["double"] or ""
            steps.append(name if match["dot"] else _ESCAPE.sub(r"\1", name))
        position = match.end()
    if not steps:
        raise ProviderProtocolError(f"Gemini partialArgs jsonPath {path!r} names no argument")
    return steps


def _container_for(step: str | int) -> dict[str, Any] | list[Any]:
    return [] if isinstance(step, int) else {}


def _child(parent: dict[str, Any] | list[Any], step: str | int, next_step: str | int) -> Any:
    """The container at `parent[step]`, created to suit `next_step` if absent."""
    want = _container_for(next_step)
    if isinstance(parent, dict) and isinstance(step, str):
        child = parent.setdefault(step, want)
    elif isinstance(parent, list) and isinstance(step, int):
        parent.extend([None] * (step + 1 - len(parent)))
        if parent[step] is None:
            parent[step] = want
        child = parent[step]
    else:
        raise ProviderProtocolError(f"Gemini partialArgs step {step!r} does not fit its parent")
    if type(child) is not type(want):
        raise ProviderProtocolError(
            f"Gemini partialArgs step {next_step!r} does not fit its parent"
        )
    return child


def assign_partial_arg(arguments: JSONObject, partial: Any) -> None:
    """Apply one `partialArgs` entry: stringValue chunks append, other values replace."""
    if not isinstance(partial, dict) or not isinstance(partial.get("jsonPath"), str):
        raise ProviderProtocolError("Gemini partialArgs entry has no jsonPath")
    steps = parse_json_path(partial["jsonPath"])
    if "stringValue" in partial:
        value, append = _typed(partial["stringValue"], str, "stringValue"), True
    elif "numberValue" in partial:
        value, append = _typed(partial["numberValue"], (int, float), "numberValue"), False
    elif "boolValue" in partial:
        value, append = _typed(partial["boolValue"], bool, "boolValue"), False
    elif "nullValue" in partial:
        value, append = None, False
    else:
        return  # a path announced before its value: nothing to store yet
    parent: dict[str, Any] | list[Any] = arguments
    for step, next_step in pairwise(steps):
        parent = _child(parent, step, next_step)
    leaf = steps[-1]
    if isinstance(parent, list) and isinstance(leaf, int):
        parent.extend([None] * (leaf + 1 - len(parent)))
        parent[leaf] = _joined(parent[leaf], value) if append else value
    elif isinstance(parent, dict) and isinstance(leaf, str):
        parent[leaf] = _joined(parent.get(leaf), value) if append else value
    else:
        raise ProviderProtocolError(f"Gemini partialArgs step {leaf!r} does not fit its parent")


def _joined(current: Any, chunk: str) -> str:
    return current + chunk if isinstance(current, str) else chunk


def _typed(value: Any, kind: type | tuple[type, ...], what: str) -> Any:
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise ProviderProtocolError(f"Gemini sent a {what} that is not a {what[:-5]}")
    return value


def _count(meta: JSONObject, key: str) -> int:
    value = meta.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def gemini_usage(meta: JSONObject) -> Usage:
    """Grove's reading of usageMetadata.

    promptTokenCount includes cached tokens, as Grove's input_tokens does, and
    toolUsePromptTokenCount is billed as input too. candidatesTokenCount excludes
    thoughts; Grove's output_tokens counts all billed output, thinking included, as the other
    wires do, and thinking_tokens says how much of it was thinking.
    """
    thoughts = _count(meta, "thoughtsTokenCount")
    return Usage(
        input_tokens=_count(meta, "promptTokenCount") + _count(meta, "toolUsePromptTokenCount"),
        output_tokens=_count(meta, "candidatesTokenCount") + thoughts,
        thinking_tokens=thoughts,
        cache_read_tokens=_count(meta, "cachedContentTokenCount"),
    )


def stream_error(error: Any) -> ProviderStreamError:
    """An `{"error": {...}}` chunk inside a 200 stream."""
    read = GoogleError.read(error)
    return ProviderStreamError(
        read.describe("in stream"),
        provider=PROVIDER,
        kind=read.status,
        retryable=read.retryable(),
        retry_after=read.retry_delay,
    )


@dataclass(slots=True)
class _OpenCall:
    """A function call still receiving `partialArgs` (willContinue)."""

    index: int
    call_id: str
    name: str
    arguments: JSONObject = field(default_factory=dict)


class GeminiStreamParser:
    """Feed every SSE event of one response; `finish()` at a clean end of the body."""

    def __init__(self) -> None:
        self._next_index = 0
        self._open: tuple[Literal["text", "thinking"], int] | None = None
        self._call: _OpenCall | None = None
        self._calls = 0
        self._call_prefix: str | None = None
        self._info: tuple[str | None, str | None] = (None, None)
        self._completed = False
        self._blocked: str | None = None

    def feed(self, event: ServerSentEvent) -> list[StreamEvent]:
        if not event.data.strip():
            return []
        try:
            payload = wirejson.loads(event.data)
        except ValueError as exc:
            raise ProviderProtocolError(
                f"Gemini sent a data line that is not JSON: {exc}", provider=PROVIDER
            ) from exc
        if not isinstance(payload, dict):
            raise ProviderProtocolError("Gemini sent a data line that is not a JSON object")
        return self.feed_json(payload)

    def feed_json(self, payload: JSONObject) -> list[StreamEvent]:
        """One GenerateContentResponse already read as JSON (reply.py reads a whole batch
        reply so)."""
        if "error" in payload:
            raise stream_error(payload["error"])
        out: list[StreamEvent] = []
        self._response_info(payload, out)
        candidate = self._first_candidate(payload)
        for part in self._parts(candidate):
            self._part(part, out)
        meta = payload.get("usageMetadata")
        if isinstance(meta, dict):
            out.append(UsageUpdate(usage=gemini_usage(meta), native=meta))
        self._prompt_feedback(payload.get("promptFeedback"))
        reason = candidate.get("finishReason")
        if isinstance(reason, str) and reason:
            self._close_call(out)
            out.append(StopReason(reason=reason))
            if not self._completed:
                self._completed = True
                out.append(Completed())
        return out

    def finish(self) -> list[StreamEvent]:
        """The body ended: close a call left open; a blocked prompt is a final error."""
        out: list[StreamEvent] = []
        self._close_call(out)
        if self._blocked is not None and not self._completed:
            raise ProviderStreamError(
                f"Gemini blocked the prompt: {self._blocked}",
                provider=PROVIDER,
                kind="prompt_blocked",
                retryable=False,
            )
        return out

    # --- one response chunk --------------------------------------------------------------

    def _response_info(self, payload: JSONObject, out: list[StreamEvent]) -> None:
        response_id, model = payload.get("responseId"), payload.get("modelVersion")
        info = (
            response_id if isinstance(response_id, str) else self._info[0],
            model if isinstance(model, str) else self._info[1],
        )
        if info != self._info:
            self._info = info
            out.append(ResponseInfo(response_id=info[0], model=info[1]))

    @staticmethod
    def _first_candidate(payload: JSONObject) -> JSONObject:
        candidates = payload.get("candidates")
        if candidates is None:
            return {}
        if not isinstance(candidates, list):
            raise ProviderProtocolError("Gemini sent candidates that are not a list")
        first = candidates[0] if candidates else {}
        if not isinstance(first, dict):
            raise ProviderProtocolError("Gemini sent a candidate that is not an object")
        return first

    @staticmethod
    def _parts(candidate: JSONObject) -> list[JSONObject]:
        content = candidate.get("content")
        parts = content.get("parts") if isinstance(content, dict) else None
        if parts is None:
            return []
        if not isinstance(parts, list) or not all(isinstance(p, dict) for p in parts):
            raise ProviderProtocolError("Gemini sent content parts that are not a list of objects")
        return parts

    def _prompt_feedback(self, feedback: Any) -> None:
        if not isinstance(feedback, dict) or not isinstance(feedback.get("blockReason"), str):
            return
        message = feedback.get("blockReasonMessage")
        self._blocked = feedback["blockReason"] + (
            f" ({message})" if isinstance(message, str) and message else ""
        )

    # --- one content part ----------------------------------------------------------------

    def _part(self, part: JSONObject, out: list[StreamEvent]) -> None:
        signature = part.get("thoughtSignature")
        if signature is not None and not isinstance(signature, str):
            raise ProviderProtocolError("Gemini sent a thoughtSignature that is not a string")
        if "functionCall" in part:
            self._open = None
            self._function_call(part["functionCall"], signature or None, out)
        elif "text" in part:
            text = part["text"]
            if not isinstance(text, str):
                raise ProviderProtocolError("Gemini sent a text part that is not a string")
            self._close_call(out)
            if part.get("thought") is True:
                self._thought(text, signature or None, out)
            else:
                self._text(text, signature or None, out)
        # Other kinds (executableCode, codeExecutionResult, inlineData, functionResponse from
        # server-side tools...) are not part of a Grove reply.

    def _text(self, text: str, signature: str | None, out: list[StreamEvent]) -> None:
        if text:
            out.append(TextDelta(index=self._index_for("text"), text=text))
        if signature:
            # Gemini wants this signature back on this text part: it rides in a part of its own
            # that the request builder folds back into the text before it.
            index = self._new_index()
            out.append(
                ThinkingSignature(
                    index=index, signature=signature, provider_data=dict(TEXT_SIGNATURE_DATA)
                )
            )
            self._open = None

    def _thought(self, text: str, signature: str | None, out: list[StreamEvent]) -> None:
        if not text and not signature:
            return
        index = self._index_for("thinking")
        if text:
            out.append(ThinkingDelta(index=index, text=text))
        if signature:
            out.append(ThinkingSignature(index=index, signature=signature))
            self._open = None  # the signature closes the part it came with

    def _function_call(self, call: Any, signature: str | None, out: list[StreamEvent]) -> None:
        if not isinstance(call, dict):
            raise ProviderProtocolError("Gemini sent a functionCall that is not an object")
        name = call.get("name")
        if name is not None:
            if not isinstance(name, str) or not name:
                raise ProviderProtocolError("Gemini sent a functionCall with an invalid name")
            self._close_call(out)
            call_id = call.get("id")
            self._call = _OpenCall(
                index=self._new_index(),
                call_id=call_id if isinstance(call_id, str) and call_id else self._new_call_id(),
                name=name,
            )
            out.append(
                ToolCallStart(
                    index=self._call.index,
                    call_id=self._call.call_id,
                    name=name,
                    signature=signature,
                )
            )
        elif self._call is None:
            if "args" in call or "partialArgs" in call:
                raise ProviderProtocolError("Gemini continued a functionCall that never started")
            return  # an empty terminator with nothing open
        elif signature:
            current = self._call
            out.append(
                ToolCallStart(
                    index=current.index,
                    call_id=current.call_id,
                    name=current.name,
                    signature=signature,
                )
            )
        self._add_arguments(call)
        if call.get("willContinue") is not True:
            self._close_call(out)

    def _add_arguments(self, call: JSONObject) -> None:
        assert self._call is not None
        args, partial_args = call.get("args"), call.get("partialArgs")
        if args is not None:
            if not isinstance(args, dict):
                raise ProviderProtocolError("Gemini sent functionCall args that are not an object")
            self._call.arguments.update(args)
        if partial_args is not None:
            if not isinstance(partial_args, list):
                raise ProviderProtocolError("Gemini sent partialArgs that are not a list")
            for partial in partial_args:
                assign_partial_arg(self._call.arguments, partial)

    def _close_call(self, out: list[StreamEvent]) -> None:
        if self._call is not None:
            out.append(ToolCallArguments(index=self._call.index, arguments=self._call.arguments))
            self._call = None

    # --- indices and ids -------------------------------------------------------------------

    def _new_index(self) -> int:
        index = self._next_index
        self._next_index += 1
        return index

    def _index_for(self, kind: Literal["text", "thinking"]) -> int:
        """Consecutive parts of one kind build one Grove part; a new kind starts the next."""
        if self._open is None or self._open[0] != kind:
            self._open = (kind, self._new_index())
        return self._open[1]

    def _new_call_id(self) -> str:
        """Gemini often sends no call id: `call_<response id>_<n>`, unique across turns."""
        if self._call_prefix is None:
            response_id = re.sub(r"[^A-Za-z0-9_-]", "", self._info[0] or "")[:40]
            self._call_prefix = response_id or secrets.token_hex(8)
        self._calls += 1
        return f"call_{self._call_prefix}_{self._calls}"
