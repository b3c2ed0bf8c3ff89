"""Responses API stream events translated into Grove stream events, one attempt at a time.

Request bodies live in responses.py. Parts are keyed by `output_index`, never by
`item_id`: some compatible servers (GitHub Copilot) send a new item_id on every event.
"""

from __future__ import annotations

from grove.providers.base import JSONObject, Usage
from grove.providers.errors import ProviderProtocolError, ProviderStreamError
from grove.providers.openai import PROVIDER
from grove.providers.openai.errors import stream_error
from grove.providers.openai.wire import event_json
from grove.providers.sse import ServerSentEvent
from grove.providers.stream_events import (
    Completed,
    ResponseInfo,
    StopReason,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ThinkingSignature,
    ToolCallArgumentsDelta,
    ToolCallStart,
    UsageUpdate,
)
from grove.providers.wirejson import json_int, json_object, json_str


class ResponsesParser:
    """One attempt's parser. Unknown event and output item types (web search, custom tools,
    shell, tool search, ...) are skipped: Grove only declares function tools.

    A failure (`error` event or `response.failed`) first yields StopReason("failed"), and the
    parser raises its ProviderStreamError on the next `feed` or at `finish`.
    """

    def __init__(self) -> None:
        self._started_calls: set[int] = set()
        self._streamed_arguments: set[int] = set()
        self._failure: ProviderStreamError | None = None

    def feed(self, sse: ServerSentEvent) -> list[StreamEvent]:
        if self._failure is not None:
            raise self._failure
        if sse.data == "[DONE]":  # some compatible servers end this API's streams so too
            return []
        return self.feed_json(event_json(sse))

    def feed_json(self, event: JSONObject) -> list[StreamEvent]:
        """One event already read as JSON (responses_reply.py reads a whole batch reply so)."""
        match event.get("type"):
            case "response.created" | "response.in_progress":
                response = json_object(event, "response")
                return [
                    ResponseInfo(
                        response_id=json_str(response, "id"), model=json_str(response, "model")
                    )
                ]
            case "response.output_item.added":
                return self._item_added(event)
            case "response.output_text.delta":
                text = _delta(event)
                return [TextDelta(index=_output_index(event), text=text)] if text else []
            case "response.reasoning_summary_text.delta" | "response.reasoning_text.delta":
                text = _delta(event)
                return [ThinkingDelta(index=_output_index(event), text=text)] if text else []
            case "response.function_call_arguments.delta":
                return self._arguments_delta(event)
            case "response.function_call_arguments.done":
                return self._whole_arguments(_output_index(event), json_str(event, "arguments"))
            case "response.output_item.done":
                return self._item_done(event)
            case "response.completed":
                return _terminal(json_object(event, "response"), "completed")
            case "response.incomplete":
                return _terminal(json_object(event, "response"), "incomplete")
            case "response.failed":
                return self._failed(json_object(event, "response"))
            case "error":
                return self._error_event(event)
            case _:
                return []

    def finish(self) -> list[StreamEvent]:
        if self._failure is not None:
            raise self._failure
        return []

    def _item_added(self, event: JSONObject) -> list[StreamEvent]:
        item = json_object(event, "item")
        if item.get("type") != "function_call":
            return []
        return self._start_call(_output_index(event), item)

    def _item_done(self, event: JSONObject) -> list[StreamEvent]:
        index = _output_index(event)
        item = json_object(event, "item")
        match item.get("type"):
            case "function_call":
                arguments = json_str(item, "arguments")
                return self._start_call(index, item) + self._whole_arguments(index, arguments)
            case "reasoning":
                return _reasoning_signature(index, item)
            case _:
                return []

    def _start_call(self, index: int, item: JSONObject) -> list[StreamEvent]:
        if index in self._started_calls:
            return []
        call_id, name = json_str(item, "call_id"), json_str(item, "name")
        if not call_id or not name:
            raise ProviderProtocolError(
                f"OpenAI function_call item at output {index} lacks a call_id or name",
                provider=PROVIDER,
            )
        self._started_calls.add(index)
        return [ToolCallStart(index=index, call_id=call_id, name=name)]

    def _arguments_delta(self, event: JSONObject) -> list[StreamEvent]:
        index = _output_index(event)
        self._streamed_arguments.add(index)
        delta = _delta(event)
        return [ToolCallArgumentsDelta(index=index, delta=delta)] if delta else []

    def _whole_arguments(self, index: int, arguments: str | None) -> list[StreamEvent]:
        """A call's final arguments count only when no deltas brought them."""
        if index in self._streamed_arguments or not arguments:
            return []
        self._streamed_arguments.add(index)
        return [ToolCallArgumentsDelta(index=index, delta=arguments)]

    def _failed(self, response: JSONObject) -> list[StreamEvent]:
        if self._failure is None:
            self._failure = stream_error(json_object(response, "error"))
        events: list[StreamEvent] = _usage_events(response)
        events.append(StopReason(reason=json_str(response, "status") or "failed"))
        return events

    def _error_event(self, event: JSONObject) -> list[StreamEvent]:
        # Seen both as {"error": {...}} and with code/message at the top level.
        nested = event.get("error")
        error = (
            nested
            if isinstance(nested, dict)
            else {key: value for key, value in event.items() if key != "type"}
        )
        if self._failure is None:
            self._failure = stream_error(error)
        return [StopReason(reason="failed")]


def _output_index(event: JSONObject) -> int:
    index = event.get("output_index")
    if not isinstance(index, int) or isinstance(index, bool) or index < 0:
        raise ProviderProtocolError(
            f"OpenAI {event.get('type')} event has no valid output_index", provider=PROVIDER
        )
    return index


def _delta(event: JSONObject) -> str:
    return json_str(event, "delta") or ""


def _reasoning_signature(index: int, item: JSONObject) -> list[StreamEvent]:
    """What a reasoning item must keep to be sent back: only items with encrypted content
    can be (requests are `store: false`), so the others leave nothing behind."""
    item_id, encrypted = json_str(item, "id"), json_str(item, "encrypted_content")
    if not item_id or not encrypted:
        return []
    summary = item.get("summary")
    data: JSONObject = {
        "id": item_id,
        "encrypted_content": encrypted,
        "summary": summary if isinstance(summary, list) else [],
    }
    return [ThinkingSignature(index=index, provider_data=data)]


def _terminal(response: JSONObject, default_status: str) -> list[StreamEvent]:
    events = _usage_events(response)
    events.append(StopReason(reason=json_str(response, "status") or default_status))
    events.append(Completed())
    return events


def _usage_events(response: JSONObject) -> list[StreamEvent]:
    native = response.get("usage")
    if not isinstance(native, dict):
        return []
    return [UsageUpdate(usage=read_usage(native), native=native)]


def read_usage(native: JSONObject) -> Usage:
    """Grove's reading of a Responses `usage`: reasoning and cached tokens are included in
    output_tokens and input_tokens respectively, as OpenAI counts them."""
    input_details = json_object(native, "input_tokens_details")
    output_details = json_object(native, "output_tokens_details")
    return Usage(
        input_tokens=json_int(native, "input_tokens"),
        output_tokens=json_int(native, "output_tokens"),
        thinking_tokens=json_int(output_details, "reasoning_tokens"),
        cache_read_tokens=json_int(input_details, "cached_tokens"),
        cache_write_tokens=json_int(input_details, "cache_write_tokens"),
    )
