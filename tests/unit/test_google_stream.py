"""GeminiStreamParser on hand-made chunks: part indices, signatures, call ids, partialArgs
paths, usage, in-stream errors, and fuzzing (only Grove's own errors may escape).
"""

from __future__ import annotations

import json
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grove.providers.accumulate import TurnAccumulator
from grove.providers.base import JSONObject, ThinkingPart, ToolCallPart, Usage
from grove.providers.errors import ProviderError, ProviderProtocolError, ProviderStreamError
from grove.providers.google.stream import (
    TEXT_SIGNATURE_DATA,
    GeminiStreamParser,
    assign_partial_arg,
    gemini_usage,
    parse_json_path,
)
from grove.providers.sse import ServerSentEvent
from grove.providers.stream_events import (
    Completed,
    StopReason,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ThinkingSignature,
    ToolCallArguments,
    ToolCallStart,
    UsageUpdate,
)


def chunk(*parts: JSONObject, finish: str | None = None, **top: Any) -> ServerSentEvent:
    candidate: JSONObject = {"content": {"role": "model", "parts": list(parts)}}
    if finish:
        candidate["finishReason"] = finish
    return ServerSentEvent(data=json.dumps({"candidates": [candidate], **top}))


def run(*events: ServerSentEvent) -> list[StreamEvent]:
    parser = GeminiStreamParser()
    out = [event for sse in events for event in parser.feed(sse)]
    return out + parser.finish()


def assemble(events: list[StreamEvent]) -> TurnAccumulator:
    accumulator = TurnAccumulator("google", "gemini-2.5-flash")
    for event in events:
        accumulator.add(event)
    return accumulator


def content_indices(events: list[StreamEvent]) -> list[tuple[str, int]]:
    return [
        (event.kind, event.index)
        for event in events
        if isinstance(event, TextDelta | ThinkingDelta | ToolCallStart)
    ]


def test_consecutive_parts_of_one_kind_share_an_index() -> None:
    events = run(
        chunk({"text": "Plan ", "thought": True}),
        chunk({"text": "more.", "thought": True}, {"text": "Hello "}),
        chunk({"text": "world"}, {"functionCall": {"name": "f", "args": {"x": 1}}}),
        chunk({"text": "after"}, finish="STOP"),
    )
    assert content_indices(events) == [
        ("thinking_delta", 0),
        ("thinking_delta", 0),
        ("text_delta", 1),
        ("text_delta", 1),
        ("tool_call_start", 2),
        ("text_delta", 3),
    ]
    turn = assemble(events).turn()
    assert [part.kind for part in turn.message.parts] == ["thinking", "text", "tool_call", "text"]
    assert turn.thinking_text == "Plan more."
    assert turn.text == "Hello worldafter"
    assert isinstance(events[-1], Completed)


def test_unknown_parts_are_ignored() -> None:
    events = run(
        chunk({"text": "a"}, {"executableCode": {"code": "1+1"}}, {"inlineData": {}}),
        chunk({"codeExecutionResult": {"output": "2"}}, {"text": "b"}, finish="STOP"),
    )
    assert assemble(events).turn().text == "ab"


def test_a_thought_signature_closes_its_thinking_part() -> None:
    events = run(
        chunk({"text": "one", "thought": True, "thoughtSignature": "c2ln"}),
        chunk({"text": "two", "thought": True}, finish="STOP"),
    )
    assert ThinkingSignature(index=0, signature="c2ln") in events
    parts = assemble(events).turn().message.parts
    assert [(p.text, p.signature) for p in parts if isinstance(p, ThinkingPart)] == [
        ("one", "c2ln"),
        ("two", None),
    ]


def test_a_signature_on_plain_text_is_kept_beside_it() -> None:
    events = run(chunk({"text": "The result is 2.", "thoughtSignature": "dGV4dA=="}, finish="STOP"))
    assert events[:2] == [
        TextDelta(index=0, text="The result is 2."),
        ThinkingSignature(index=1, signature="dGV4dA==", provider_data=TEXT_SIGNATURE_DATA),
    ]
    turn = assemble(events).turn()
    assert turn.text == "The result is 2."
    assert turn.thinking_text == ""


def test_call_ids_are_gemini_s_or_unique_per_response() -> None:
    events = run(
        chunk(
            {"functionCall": {"name": "a", "args": {}, "id": "gemini-id"}},
            {"functionCall": {"name": "b", "args": {}}},
            {"functionCall": {"name": "c", "args": {}}},
            finish="STOP",
            responseId="resp-42",
        )
    )
    ids = [event.call_id for event in events if isinstance(event, ToolCallStart)]
    assert ids == ["gemini-id", "call_resp-42_1", "call_resp-42_2"]
    other = run(chunk({"functionCall": {"name": "b", "args": {}}}, finish="STOP"))
    (other_id,) = [event.call_id for event in other if isinstance(event, ToolCallStart)]
    assert other_id.startswith("call_") and other_id not in ids


def test_streamed_arguments_are_assembled_by_json_path() -> None:
    def partial(path: str, **value: Any) -> JSONObject:
        return {
            "functionCall": {"partialArgs": [{"jsonPath": path, **value}], "willContinue": True}
        }

    events = run(
        chunk({"functionCall": {"name": "plan", "willContinue": True}, "thoughtSignature": "c2ln"}),
        chunk(partial("$.steps[1]", stringValue="sec", willContinue=True)),
        chunk(partial("$.steps[1]", stringValue="ond")),
        chunk(partial("$.steps[0]", stringValue="first")),
        chunk(partial("$['odd key'].n", numberValue=2)),
        chunk(partial('$.flags["on"]', boolValue=True)),
        chunk(partial("$.nothing", nullValue="NULL_VALUE")),
        chunk({"functionCall": {}}),
        chunk({"text": ""}, finish="STOP"),
    )
    (arguments,) = [event.arguments for event in events if isinstance(event, ToolCallArguments)]
    assert arguments == {
        "steps": ["first", "second"],
        "odd key": {"n": 2},
        "flags": {"on": True},
        "nothing": None,
    }
    (call,) = assemble(events).turn().tool_calls
    assert call == ToolCallPart(
        call_id=call.call_id, name="plan", arguments=arguments, signature="c2ln"
    )


def test_an_unterminated_streamed_call_closes_at_the_end() -> None:
    events = run(
        chunk({"functionCall": {"name": "f", "willContinue": True}}),
        chunk(
            {
                "functionCall": {
                    "partialArgs": [{"jsonPath": "$.a", "stringValue": "x"}],
                    "willContinue": True,
                }
            },
            finish="STOP",
        ),
    )
    assert ToolCallArguments(index=0, arguments={"a": "x"}) in events
    assert events.index(ToolCallArguments(index=0, arguments={"a": "x"})) < events.index(
        StopReason(reason="STOP")
    )


def test_a_continuation_with_no_call_open_is_a_protocol_error() -> None:
    stray = {"functionCall": {"partialArgs": [{"jsonPath": "$.a", "stringValue": "x"}]}}
    with pytest.raises(ProviderProtocolError, match="never started"):
        run(chunk(stray))


@pytest.mark.parametrize(
    ("path", "steps"),
    [
        ("$.a", ["a"]),
        ("$.a.b[12].c", ["a", "b", 12, "c"]),
        ("$['it''s'][0]", None),
        ("$['with space']['q\\'d']", ["with space", "q'd"]),
        ('$["x"][3]', ["x", 3]),
        ("$", None),
        ("a.b", None),
        ("$.a[x]", None),
    ],
)
def test_json_paths(path: str, steps: list[str | int] | None) -> None:
    if steps is None:
        with pytest.raises(ProviderProtocolError):
            parse_json_path(path)
    else:
        assert parse_json_path(path) == steps


def test_a_path_that_contradicts_earlier_values_is_a_protocol_error() -> None:
    arguments: JSONObject = {}
    assign_partial_arg(arguments, {"jsonPath": "$.a[0]", "stringValue": "x"})
    with pytest.raises(ProviderProtocolError, match="does not fit"):
        assign_partial_arg(arguments, {"jsonPath": "$.a.b", "stringValue": "y"})
    with pytest.raises(ProviderProtocolError, match="not a number"):
        assign_partial_arg(arguments, {"jsonPath": "$.n", "numberValue": "3"})
    assert arguments == {"a": ["x"]}


def test_usage_reading() -> None:
    meta = {
        "promptTokenCount": 100,
        "candidatesTokenCount": 20,
        "thoughtsTokenCount": 30,
        "cachedContentTokenCount": 40,
        "toolUsePromptTokenCount": 5,
        "totalTokenCount": 155,
    }
    assert gemini_usage(meta) == Usage(
        input_tokens=105, output_tokens=50, thinking_tokens=30, cache_read_tokens=40
    )
    events = run(ServerSentEvent(data=json.dumps({"usageMetadata": meta})))
    assert events == [UsageUpdate(usage=gemini_usage(meta), native=meta)]
    assert gemini_usage({"trafficType": "ON_DEMAND", "promptTokenCount": "9"}) == Usage()


@pytest.mark.parametrize(
    ("status", "retryable"),
    [
        ("UNAVAILABLE", True),
        ("INTERNAL", True),
        ("RESOURCE_EXHAUSTED", True),
        ("INVALID_ARGUMENT", False),
        ("PERMISSION_DENIED", False),
    ],
)
def test_an_error_chunk_raises(status: str, retryable: bool) -> None:
    error = {
        "code": 503,
        "status": status,
        "message": "overloaded",
        "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "2.5s"}],
    }
    with pytest.raises(ProviderStreamError) as caught:
        run(chunk({"text": "partial"}), ServerSentEvent(data=json.dumps({"error": error})))
    assert caught.value.retryable is retryable
    assert caught.value.kind == status
    assert caught.value.retry_after == 2.5
    assert caught.value.provider == "google"


def test_a_spend_limit_in_the_stream_is_not_retried() -> None:
    error = {"code": 429, "status": "RESOURCE_EXHAUSTED", "message": "Monthly spending cap reached"}
    with pytest.raises(ProviderStreamError) as caught:
        run(ServerSentEvent(data=json.dumps({"error": error})))
    assert not caught.value.retryable


def test_data_that_is_not_json_is_a_protocol_error() -> None:
    with pytest.raises(ProviderProtocolError, match="not JSON"):
        run(ServerSentEvent(data="{truncated"))
    with pytest.raises(ProviderProtocolError, match="not a JSON object"):
        run(ServerSentEvent(data="[1, 2]"))
    assert run(ServerSentEvent(data="  ")) == []


def test_a_blocked_prompt_fails_at_the_end_without_retry() -> None:
    feedback = {"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}}
    parser = GeminiStreamParser()
    assert parser.feed(ServerSentEvent(data=json.dumps(feedback))) == []
    with pytest.raises(ProviderStreamError, match="PROHIBITED_CONTENT") as caught:
        parser.finish()
    assert not caught.value.retryable


# --- fuzzing --------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
part_values = st.fixed_dictionaries(
    {},
    optional={
        "text": st.text(max_size=6) | json_values,
        "thought": st.booleans() | json_values,
        "thoughtSignature": st.text(max_size=6) | json_values,
        "functionCall": st.fixed_dictionaries(
            {},
            optional={
                "name": st.sampled_from(["f", "g", ""]) | json_values,
                "id": st.text(max_size=4) | json_values,
                "args": st.dictionaries(st.text(max_size=3), json_values, max_size=3) | json_values,
                "willContinue": st.booleans() | json_values,
                "partialArgs": st.lists(
                    st.fixed_dictionaries(
                        {"jsonPath": st.sampled_from(["$.a", "$.a[1]", "$.b.c", "$[0]", "x"])},
                        optional={
                            "stringValue": st.text(max_size=4) | json_values,
                            "numberValue": st.integers() | json_values,
                            "willContinue": st.booleans(),
                        },
                    ),
                    max_size=3,
                )
                | json_values,
            },
        ),
    },
)
payloads = st.fixed_dictionaries(
    {},
    optional={
        "candidates": st.lists(
            st.fixed_dictionaries(
                {},
                optional={
                    "content": st.fixed_dictionaries(
                        {}, optional={"parts": st.lists(part_values, max_size=4) | json_values}
                    )
                    | json_values,
                    "finishReason": st.sampled_from(["STOP", "MAX_TOKENS"]) | json_values,
                },
            ),
            max_size=2,
        )
        | json_values,
        "usageMetadata": st.dictionaries(st.sampled_from(["promptTokenCount", "x"]), json_values)
        | json_values,
        "promptFeedback": json_values,
        "responseId": json_values,
        "modelVersion": json_values,
    },
)


@settings(max_examples=400, deadline=None)
@given(st.lists(payloads, max_size=6))
def test_any_chunks_give_events_or_a_grove_error(chunks: list[JSONObject]) -> None:
    parser = GeminiStreamParser()
    accumulator = TurnAccumulator("google", "gemini-2.5-flash")
    try:
        for payload in chunks:
            for event in parser.feed(ServerSentEvent(data=json.dumps(payload))):
                accumulator.add(event)
        for event in parser.finish():
            accumulator.add(event)
        accumulator.turn()
    except ProviderError:
        pass


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=1, max_size=40), st.lists(st.integers(min_value=0, max_value=40)))
def test_string_arguments_split_anywhere_assemble_the_same(text: str, cuts: list[int]) -> None:
    bounds = sorted({0, len(text), *(c for c in cuts if c <= len(text))})
    pieces = [text[a:b] for a, b in pairwise(bounds)]
    events = run(
        chunk({"functionCall": {"name": "f", "willContinue": True}}),
        *(
            chunk(
                {
                    "functionCall": {
                        "partialArgs": [{"jsonPath": "$.s", "stringValue": piece}],
                        "willContinue": True,
                    }
                }
            )
            for piece in pieces
        ),
        chunk({"functionCall": {}}, finish="STOP"),
    )
    (call,) = assemble(events).turn().tool_calls
    assert call.arguments == {"s": text}
