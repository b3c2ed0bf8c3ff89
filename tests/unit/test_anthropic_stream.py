"""The Anthropic stream parser on events the recorded corpus lacks: errors, redacted thinking,
unknown events, usage details and malformed input.
"""

from __future__ import annotations

import contextlib
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from grove.providers.accumulate import TurnAccumulator
from grove.providers.anthropic.wire import AnthropicWire
from grove.providers.base import JSONObject, Message, Request, TextPart, ThinkingPart, Usage
from grove.providers.errors import ProviderError, ProviderProtocolError, ProviderStreamError
from grove.providers.http import Endpoint
from grove.providers.sse import SSEDecoder
from grove.providers.stream_events import StreamEvent, UsageUpdate

START = {
    "type": "message_start",
    "message": {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [],
        "usage": {"input_tokens": 10, "output_tokens": 1},
    },
}
STOP = {"type": "message_stop"}


def frame(*events: JSONObject, named: bool = True) -> bytes:
    """SSE bytes as Anthropic sends them: `event: <type>` then `data: <json>`."""
    lines = []
    for event in events:
        if named:
            lines.append(f"event: {event['type']}")
        lines.append(f"data: {json.dumps(event)}\n")
    return ("\n".join(lines) + "\n").encode()


def block_start(index: int, block: JSONObject) -> JSONObject:
    return {"type": "content_block_start", "index": index, "content_block": block}


def block_delta(index: int, delta: JSONObject) -> JSONObject:
    return {"type": "content_block_delta", "index": index, "delta": delta}


def message_delta(stop_reason: str | None, usage: JSONObject) -> JSONObject:
    return {"type": "message_delta", "delta": {"stop_reason": stop_reason}, "usage": usage}


def run(data: bytes) -> tuple[list[StreamEvent], TurnAccumulator]:
    decoder, parser = SSEDecoder(), AnthropicWire().new_parser()
    accumulator = TurnAccumulator("anthropic", "claude-sonnet-4-5")
    events: list[StreamEvent] = []
    for sse in decoder.decode(data) + decoder.flush():
        events.extend(parser.feed(sse))
    events.extend(parser.finish())
    for event in events:
        accumulator.add(event)
    return events, accumulator


# --- error events ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "retryable"),
    [
        ("overloaded_error", True),
        ("api_error", True),
        ("invalid_request_error", False),
        ("authentication_error", False),
        ("billing_error", False),
    ],
)
def test_an_error_event_raises_a_stream_error(kind: str, retryable: bool) -> None:
    error = {"type": "error", "error": {"type": kind, "message": "It went wrong."}}
    with pytest.raises(ProviderStreamError) as caught:
        run(frame(START, error))
    assert str(caught.value) == f"anthropic: {kind}: It went wrong."
    assert caught.value.kind == kind
    assert caught.value.retryable is retryable
    assert caught.value.provider == "anthropic"


def test_an_error_event_without_details_is_not_retried() -> None:
    with pytest.raises(ProviderStreamError) as caught:
        run(frame(START, {"type": "error"}))
    assert str(caught.value) == "anthropic: unknown_error: no message"
    assert not caught.value.retryable


# --- content ---------------------------------------------------------------------------------


def test_redacted_thinking_is_kept_and_sent_back_verbatim() -> None:
    data = frame(
        START,
        block_start(0, {"type": "redacted_thinking", "data": "EmwKAhgBEgy-opaque"}),
        {"type": "content_block_stop", "index": 0},
        block_start(1, {"type": "text", "text": ""}),
        block_delta(1, {"type": "text_delta", "text": "Hello."}),
        {"type": "content_block_stop", "index": 1},
        message_delta("end_turn", {"output_tokens": 5}),
        STOP,
    )
    _, accumulator = run(data)
    reply = accumulator.turn().message
    assert reply.parts == (
        ThinkingPart(
            text="",
            provider="anthropic",
            provider_data={"type": "redacted_thinking", "data": "EmwKAhgBEgy-opaque"},
        ),
        TextPart(text="Hello."),
    )
    request = Request(
        model="claude-sonnet-4-5",
        messages=(Message.user("Hi"), reply, Message.user("Again")),
        thinking="low",
    )
    body = AnthropicWire().prepare(request, Endpoint(base_url="http://x", api_key="k")).body
    assert body["messages"][1]["content"] == [
        {"type": "redacted_thinking", "data": "EmwKAhgBEgy-opaque"},
        {"type": "text", "text": "Hello."},
    ]


def test_a_tool_call_whose_start_carries_its_whole_input_keeps_it() -> None:
    data = frame(
        START,
        block_start(
            0, {"type": "tool_use", "id": "toolu_9", "name": "lookup", "input": {"q": "x"}}
        ),
        {"type": "content_block_stop", "index": 0},
        message_delta("tool_use", {"output_tokens": 3}),
        STOP,
    )
    _, accumulator = run(data)
    (call,) = accumulator.turn().tool_calls
    assert (call.call_id, call.name, call.arguments) == ("toolu_9", "lookup", {"q": "x"})


def test_blocks_grove_does_not_keep_are_skipped_with_their_deltas() -> None:
    data = frame(
        START,
        block_start(0, {"type": "web_search_tool_result", "tool_use_id": "s", "content": []}),
        block_delta(0, {"type": "text_delta", "text": "not ours"}),
        block_start(1, {"type": "text", "text": "Said"}),
        block_delta(1, {"type": "citations_delta", "citation": {"type": "x"}}),
        block_delta(1, {"type": "text_delta", "text": " this."}),
        message_delta("end_turn", {"output_tokens": 3}),
        STOP,
    )
    _, accumulator = run(data)
    assert accumulator.turn().message.parts == (TextPart(text="Said this."),)


def test_pings_unknown_events_and_content_block_stop_are_ignored_whatever_they_hold() -> None:
    data = (
        frame(START)
        + b"event: ping\ndata: not json\n\n"
        + b"event: brand_new_event\ndata: {{{\n\n"
        + b"event: content_block_stop\ndata: ???\n\n"
        + frame(block_start(0, {"type": "text", "text": ""}))
        + frame(block_delta(0, {"type": "text_delta", "text": "ok"}), STOP)
    )
    events, accumulator = run(data)
    assert accumulator.text == "ok"
    assert accumulator.completed
    assert [event.kind for event in events] == [
        "response_info",
        "usage",
        "text_delta",
        "completed",
    ]


def test_events_without_an_event_line_are_read_by_their_json_type() -> None:
    data = frame(
        START,
        block_start(0, {"type": "text", "text": ""}),
        block_delta(0, {"type": "text_delta", "text": "plain"}),
        message_delta("end_turn", {"output_tokens": 2}),
        STOP,
        named=False,
    )
    _, accumulator = run(data)
    assert (accumulator.text, accumulator.stop_reason, accumulator.completed) == (
        "plain",
        "end_turn",
        True,
    )


def test_a_stream_without_message_stop_is_not_complete() -> None:
    _, accumulator = run(frame(START, block_start(0, {"type": "text", "text": "Hal"})))
    assert accumulator.text == "Hal"
    assert not accumulator.completed


def test_empty_deltas_make_no_content() -> None:
    data = frame(
        START,
        block_start(0, {"type": "text", "text": ""}),
        block_delta(0, {"type": "text_delta", "text": ""}),
    )
    events, accumulator = run(data)
    assert not accumulator.content_seen
    assert [event.kind for event in events] == ["response_info", "usage"]


# --- usage -----------------------------------------------------------------------------------


def test_usage_overlays_message_delta_on_message_start_and_reads_every_count() -> None:
    start = {
        "type": "message_start",
        "message": {
            "id": "msg_2",
            "model": "claude-opus-4-5",
            "usage": {
                "input_tokens": 100,
                "output_tokens": 1,
                "cache_read_input_tokens": 2000,
                "cache_creation_input_tokens": 300,
                "service_tier": "standard",
            },
        },
    }
    delta = message_delta(
        "end_turn",
        {
            "output_tokens": 250,
            "cache_creation_input_tokens": None,
            "output_tokens_details": {"thinking_tokens": 180},
        },
    )
    events, accumulator = run(frame(start, delta, STOP))
    updates = [event for event in events if isinstance(event, UsageUpdate)]
    assert [update.usage.output_tokens for update in updates] == [1, 250]
    assert accumulator.usage == Usage(
        input_tokens=2_400,  # Grove counts the whole prompt: 100 + 2,000 read + 300 written
        output_tokens=250,
        thinking_tokens=180,
        cache_read_tokens=2000,
        cache_write_tokens=300,
    )
    assert accumulator.native_usage == {
        "input_tokens": 100,
        "output_tokens": 250,
        "cache_read_input_tokens": 2000,
        "cache_creation_input_tokens": 300,
        "service_tier": "standard",
        "output_tokens_details": {"thinking_tokens": 180},
    }
    assert updates[0].native["output_tokens"] == 1  # earlier updates are not rewritten


# --- malformed input -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "text"),
    [
        (b"event: message_start\ndata: {oops\n\n", "message_start event is not JSON"),
        (b"event: message_delta\ndata: [1, 2]\n\n", "message_delta event is not a JSON object"),
        (
            frame({"type": "content_block_delta", "delta": {"type": "text_delta", "text": "x"}}),
            "content_block_delta event without a valid index: None",
        ),
        (frame(block_start(-1, {"type": "text", "text": ""})), "without a valid index: -1"),
        (frame(block_delta(0, {"type": "text_delta", "text": 7})), "text_delta has no string"),
        (
            frame(block_start(0, {"type": "tool_use", "name": "lookup", "input": {}})),
            "tool_use has no string 'id'",
        ),
    ],
)
def test_malformed_events_are_precise_protocol_errors(data: bytes, text: str) -> None:
    with pytest.raises(ProviderProtocolError, match=text) as caught:
        run(data)
    assert caught.value.provider == "anthropic"


EVENT_TYPES = [
    "message_start",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop",
    "ping",
    "error",
    "mystery",
]
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=12,
)
EVENT_FIELDS = st.fixed_dictionaries(
    {},
    optional={
        "index": st.integers(min_value=-2, max_value=3) | JSON_VALUES,
        "message": st.fixed_dictionaries(
            {}, optional={"id": JSON_VALUES, "model": JSON_VALUES, "usage": JSON_VALUES}
        )
        | JSON_VALUES,
        "content_block": st.fixed_dictionaries(
            {"type": st.sampled_from(["text", "thinking", "tool_use", "redacted_thinking", "x"])},
            optional={
                "text": JSON_VALUES,
                "thinking": JSON_VALUES,
                "signature": JSON_VALUES,
                "id": JSON_VALUES,
                "name": JSON_VALUES,
                "input": JSON_VALUES,
                "data": JSON_VALUES,
            },
        ),
        "delta": st.fixed_dictionaries(
            {"type": st.sampled_from(["text_delta", "thinking_delta", "input_json_delta", "y"])},
            optional={
                "text": JSON_VALUES,
                "thinking": JSON_VALUES,
                "partial_json": JSON_VALUES,
                "stop_reason": JSON_VALUES,
            },
        ),
        "usage": JSON_VALUES,
        "error": JSON_VALUES,
    },
)


@given(st.lists(st.tuples(st.sampled_from(EVENT_TYPES), EVENT_FIELDS), max_size=8))
def test_any_sequence_of_event_shapes_ends_in_events_or_a_provider_error(
    events: list[tuple[str, JSONObject]],
) -> None:
    data = frame(*({**fields, "type": name} for name, fields in events))
    with contextlib.suppress(ProviderError):
        run(data)[1].turn()


@given(st.binary(max_size=400))
def test_any_bytes_end_in_events_or_a_provider_error(data: bytes) -> None:
    with contextlib.suppress(ProviderError):
        run(data)[1].turn()
