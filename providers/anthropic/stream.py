"""Anthropic Messages stream events mapped to Grove's, one attempt at a time, and Anthropic's
usage read as Grove's. Request bodies live in request.py; error bodies in errors.py.
"""

from __future__ import annotations

from typing import Any

from grove.providers import wirejson
from grove.providers.anthropic import PROVIDER
from grove.providers.anthropic.errors import stream_error
from grove.providers.base import JSONObject, Usage
from grove.providers.errors import ProviderProtocolError
from grove.providers.secrets import mask
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
    ToolCallArgumentsDelta,
    ToolCallStart,
    UsageUpdate,
)
from grove.providers.wirejson import json_int, json_object, json_str

TOOL_CALL_BLOCKS = frozenset({"tool_use", "server_tool_use"})
# Events read here; content_block_stop, ping and unknown events carry nothing Grove keeps.
HANDLED_EVENTS = frozenset(
    {
        "message_start",
        "content_block_start",
        "content_block_delta",
        "message_delta",
        "message_stop",
        "error",
    }
)


class AnthropicStreamParser:
    """One attempt's Messages events in, Grove stream events out.

    Usage is message_start's usage overlaid with each non-null field of message_delta's.
    Content blocks Grove does not keep (server tool results, compaction, fallback notes...)
    are skipped with their deltas; pings and unknown events are ignored.
    """

    def __init__(self) -> None:
        self._usage: JSONObject = {}
        self._skipped: set[int] = set()

    def feed(self, event: ServerSentEvent) -> list[StreamEvent]:
        name = event.event
        if name == "message":  # no `event:` line: the JSON's own type names it
            data = event_json(event)
            name = json_str(data, "type") or name
        elif name in HANDLED_EVENTS:
            data = event_json(event)
        else:
            return []
        return self.feed_json(name, data)

    def feed_json(self, name: str, data: JSONObject) -> list[StreamEvent]:
        """One event already read as JSON (reply.py reads a whole batch reply so)."""
        match name:
            case "message_start":
                return self._message_start(json_object(data, "message"))
            case "content_block_start":
                return self._block_start(block_index(data), json_object(data, "content_block"))
            case "content_block_delta":
                return self._block_delta(block_index(data), json_object(data, "delta"))
            case "message_delta":
                return self._message_delta(data)
            case "message_stop":
                return [Completed()]
            case "error":
                raise stream_error(json_object(data, "error"))
        return []

    def finish(self) -> list[StreamEvent]:
        return []

    def _message_start(self, message: JSONObject) -> list[StreamEvent]:
        self._usage = dict(json_object(message, "usage"))
        return [
            ResponseInfo(response_id=json_str(message, "id"), model=json_str(message, "model")),
            self._usage_update(),
        ]

    def _block_start(self, index: int, block: JSONObject) -> list[StreamEvent]:
        kind = json_str(block, "type")
        events: list[StreamEvent] = []
        if kind == "text":
            if text := optional_text(block, "text", kind):
                events.append(TextDelta(index=index, text=text))
        elif kind == "thinking":
            if text := optional_text(block, "thinking", kind):
                events.append(ThinkingDelta(index=index, text=text))
            if signature := optional_text(block, "signature", kind):
                events.append(ThinkingSignature(index=index, signature=signature))
        elif kind == "redacted_thinking":
            data = {"type": kind, "data": required_text(block, "data", kind)}
            events.append(ThinkingSignature(index=index, provider_data=data))
        elif kind in TOOL_CALL_BLOCKS:
            call_id, name = required_text(block, "id", kind), required_text(block, "name", kind)
            events.append(ToolCallStart(index=index, call_id=call_id, name=name))
            if arguments := json_object(block, "input"):  # complete input, no deltas to come
                events.append(ToolCallArguments(index=index, arguments=arguments))
        else:
            self._skipped.add(index)
        return events

    def _block_delta(self, index: int, delta: JSONObject) -> list[StreamEvent]:
        if index in self._skipped:
            return []
        kind = json_str(delta, "type")
        event: StreamEvent
        if kind == "text_delta":
            event = TextDelta(index=index, text=required_text(delta, "text", kind))
            return [event] if event.text else []
        if kind == "thinking_delta":
            event = ThinkingDelta(index=index, text=required_text(delta, "thinking", kind))
            return [event] if event.text else []
        if kind == "signature_delta":
            signature = required_text(delta, "signature", kind)
            return [ThinkingSignature(index=index, signature=signature)] if signature else []
        if kind == "input_json_delta":
            partial = required_text(delta, "partial_json", kind)
            return [ToolCallArgumentsDelta(index=index, delta=partial)] if partial else []
        return []  # citations_delta and other kinds Grove does not keep

    def _message_delta(self, data: JSONObject) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        if reason := json_str(json_object(data, "delta"), "stop_reason"):
            events.append(StopReason(reason=reason))
        usage = json_object(data, "usage")
        if usage:
            self._usage.update({key: value for key, value in usage.items() if value is not None})
            events.append(self._usage_update())
        return events

    def _usage_update(self) -> UsageUpdate:
        native = dict(self._usage)
        return UsageUpdate(usage=grove_usage(native), native=native)


def grove_usage(native: JSONObject) -> Usage:
    """Grove's reading of an Anthropic usage object, where `input_tokens` counts only what
    follows the last cache breakpoint: Grove's counts the whole prompt."""
    read = json_int(native, "cache_read_input_tokens")
    written = json_int(native, "cache_creation_input_tokens")
    return Usage(
        input_tokens=json_int(native, "input_tokens") + read + written,
        output_tokens=json_int(native, "output_tokens"),
        thinking_tokens=json_int(json_object(native, "output_tokens_details"), "thinking_tokens"),
        cache_read_tokens=read,
        cache_write_tokens=written,
        cache_write_1h_tokens=json_int(
            json_object(native, "cache_creation"), "ephemeral_1h_input_tokens"
        ),
    )


# --- reading event JSON --------------------------------------------------------------------


def event_json(event: ServerSentEvent) -> JSONObject:
    """The JSON object an SSE event carries, or ProviderProtocolError."""
    try:
        value: Any = wirejson.loads(event.data)
    except ValueError as exc:
        raise ProviderProtocolError(
            f"anthropic: {event.event} event is not JSON: {mask(event.data[:80])!r}",
            provider=PROVIDER,
        ) from exc
    if not isinstance(value, dict):
        raise ProviderProtocolError(
            f"anthropic: {event.event} event is not a JSON object: {mask(event.data[:80])!r}",
            provider=PROVIDER,
        )
    return value


def block_index(data: JSONObject) -> int:
    index = data.get("index")
    if not isinstance(index, int) or isinstance(index, bool) or index < 0:
        raise ProviderProtocolError(
            f"anthropic: {json_str(data, 'type') or 'content block'} event without a valid "
            f"index: {index!r}",
            provider=PROVIDER,
        )
    return index


def required_text(container: JSONObject, key: str, kind: str | None) -> str:
    value = container.get(key)
    if not isinstance(value, str):
        raise ProviderProtocolError(
            f"anthropic: {kind or 'event'} has no string {key!r}: {type(value).__name__}",
            provider=PROVIDER,
        )
    return value


def optional_text(container: JSONObject, key: str, kind: str | None) -> str:
    """`container[key]`; absent or null is empty, any other non-string is a protocol error."""
    return "" if container.get(key) is None else required_text(container, key, kind)
