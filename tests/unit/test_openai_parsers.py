"""The OpenAI stream parsers on hand-made events the corpus lacks, and fuzzed with hypothesis.

Each case is one wire quirk or failure; the fuzz checks that bad input only ever raises
Grove's own provider errors.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grove.providers.accumulate import TurnAccumulator
from grove.providers.base import AssistantTurn, ThinkingPart
from grove.providers.errors import ProviderError, ProviderProtocolError, ProviderStreamError
from grove.providers.http import WireParser
from grove.providers.openai.chat_stream import ChatParser
from grove.providers.openai.responses_stream import ResponsesParser
from grove.providers.sse import ServerSentEvent


def sse(data: dict[str, Any] | str) -> ServerSentEvent:
    return ServerSentEvent(data=data if isinstance(data, str) else json.dumps(data))


def run(parser: WireParser, events: list[dict[str, Any] | str]) -> TurnAccumulator:
    accumulator = TurnAccumulator("openai", "gpt-5-mini")
    for event in events:
        for parsed in parser.feed(sse(event)):
            accumulator.add(parsed)
    for parsed in parser.finish():
        accumulator.add(parsed)
    return accumulator


def completed(status: str = "completed", usage: dict[str, Any] | None = None) -> dict[str, Any]:
    kind = "response.completed" if status == "completed" else f"response.{status}"
    return {"type": kind, "response": {"id": "resp_1", "status": status, "usage": usage}}


# --- Responses ------------------------------------------------------------------------------


def test_function_call_whose_arguments_only_come_whole() -> None:
    item = {"type": "function_call", "call_id": "call_9", "name": "lookup", "arguments": ""}
    done = {**item, "arguments": '{"q": "grove"}'}
    accumulator = run(
        ResponsesParser(),
        [
            {"type": "response.output_item.added", "output_index": 0, "item": item},
            {"type": "response.output_item.done", "output_index": 0, "item": done},
            completed(),
        ],
    )
    (call,) = accumulator.turn().tool_calls
    assert (call.call_id, call.name, call.arguments) == ("call_9", "lookup", {"q": "grove"})


def test_function_call_seen_only_when_done_still_starts() -> None:
    done = {"type": "function_call", "call_id": "c", "name": "f", "arguments": '{"a": 1}'}
    accumulator = run(
        ResponsesParser(),
        [{"type": "response.output_item.done", "output_index": 3, "item": done}, completed()],
    )
    assert [(c.name, c.arguments) for c in accumulator.turn().tool_calls] == [("f", {"a": 1})]


def test_streamed_arguments_are_not_doubled_by_the_done_events() -> None:
    item = {"type": "function_call", "call_id": "c", "name": "f", "arguments": ""}
    whole = '{"a": 1}'
    accumulator = run(
        ResponsesParser(),
        [
            {"type": "response.output_item.added", "output_index": 0, "item": item},
            {"type": "response.function_call_arguments.delta", "output_index": 0, "delta": '{"a"'},
            {"type": "response.function_call_arguments.delta", "output_index": 0, "delta": ": 1}"},
            {
                "type": "response.function_call_arguments.done",
                "output_index": 0,
                "arguments": whole,
            },
            {
                "type": "response.output_item.done",
                "output_index": 0,
                "item": {**item, "arguments": whole},
            },
            completed(),
        ],
    )
    assert accumulator.raw_tool_calls() == [("f", whole, None)]


def test_summary_parts_of_one_item_make_one_thinking_part_then_text() -> None:
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": []}
    accumulator = run(
        ResponsesParser(),
        [
            {"type": "response.output_item.added", "output_index": 0, "item": reasoning},
            *(
                {
                    "type": "response.reasoning_summary_text.delta",
                    "output_index": 0,
                    "summary_index": n,
                    "delta": text,
                }
                for n, text in enumerate(["First. ", "Second."])
            ),
            {
                "type": "response.output_item.done",
                "output_index": 0,
                "item": {**reasoning, "encrypted_content": "enc"},
            },
            {"type": "response.output_text.delta", "output_index": 1, "delta": "Answer"},
            completed(),
        ],
    )
    thinking, text = accumulator.turn().message.parts
    assert isinstance(thinking, ThinkingPart)
    assert thinking.text == "First. Second."
    assert thinking.provider_data == {"id": "rs_1", "encrypted_content": "enc", "summary": []}
    assert text.kind == "text"


def test_raw_reasoning_text_of_compatible_servers_is_thinking() -> None:
    accumulator = run(
        ResponsesParser(),
        [
            {"type": "response.reasoning_text.delta", "output_index": 0, "delta": "Hmm."},
            {"type": "response.output_text.delta", "output_index": 1, "delta": "Hi"},
            completed(),
        ],
    )
    assert (accumulator.thinking, accumulator.text) == ("Hmm.", "Hi")


def test_incomplete_response_is_terminal_with_its_status_and_usage() -> None:
    usage = {
        "input_tokens": 100,
        "input_tokens_details": {"cached_tokens": 40},
        "output_tokens": 64,
        "output_tokens_details": {"reasoning_tokens": 60},
        "total_tokens": 164,
    }
    accumulator = run(
        ResponsesParser(),
        [
            {"type": "response.output_text.delta", "output_index": 1, "delta": "Cut"},
            completed("incomplete", usage),
        ],
    )
    turn: AssistantTurn = accumulator.turn()
    assert accumulator.completed
    assert turn.stop_reason == "incomplete"
    assert turn.native_usage == usage
    assert turn.usage.as_dict() == {
        "input_tokens": 100,
        "output_tokens": 64,
        "thinking_tokens": 60,
        "cache_read_tokens": 40,
        "cache_write_tokens": 0,
    }


def test_failed_response_records_its_stop_then_raises_a_retryable_server_error() -> None:
    parser = ResponsesParser()
    accumulator = TurnAccumulator("openai", "gpt-5-mini")
    failed = {
        "type": "response.failed",
        "response": {"status": "failed", "error": {"code": "server_error", "message": "oops"}},
    }
    for event in parser.feed(sse(failed)):
        accumulator.add(event)
    assert accumulator.stop_reason == "failed"
    with pytest.raises(ProviderStreamError) as raised:
        parser.finish()
    assert raised.value.retryable is True
    assert raised.value.kind == "server_error"
    assert not accumulator.completed


def test_error_event_with_top_level_fields_raises_on_the_next_event() -> None:
    parser = ResponsesParser()
    error = {"type": "error", "code": "rate_limit_exceeded", "message": "slow down", "param": None}
    assert [event.kind for event in parser.feed(sse(error))] == ["stop_reason"]
    with pytest.raises(ProviderStreamError) as raised:
        parser.feed(sse(completed()))
    assert raised.value.kind == "rate_limit_exceeded"
    assert raised.value.retryable is True


def test_unknown_events_and_items_are_skipped() -> None:
    accumulator = run(
        ResponsesParser(),
        [
            {"type": "response.queued", "response": {}},
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {"type": "shell_call"},
            },
            {"type": "response.shell_call.delta", "output_index": 0, "delta": "ls"},
            {
                "type": "response.output_item.done",
                "output_index": 0,
                "item": {"type": "shell_call"},
            },
            {"type": "response.output_text.delta", "output_index": 1, "delta": "ok"},
            "[DONE]",
            completed(),
        ],
    )
    assert accumulator.turn().message.text == "ok"
    assert accumulator.completed


@pytest.mark.parametrize(
    "event",
    [
        {"type": "response.output_text.delta", "delta": "no index"},
        {"type": "response.output_text.delta", "output_index": "1", "delta": "x"},
        {"type": "response.output_text.delta", "output_index": -1, "delta": "x"},
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {"type": "function_call"},
        },
        "not json",
        "[1, 2]",
    ],
)
def test_unreadable_responses_events_are_protocol_errors(event: dict[str, Any] | str) -> None:
    with pytest.raises(ProviderProtocolError):
        ResponsesParser().feed(sse(event))


# --- Chat Completions -----------------------------------------------------------------------


def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "model": "local-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        **extra,
    }


def test_chat_reasoning_fields_text_and_done() -> None:
    accumulator = run(
        ChatParser(),
        [
            chunk({"role": "assistant", "reasoning_content": "Think"}),
            chunk({"reasoning": "ing."}),
            chunk({"content": "Hello"}),
            chunk({}, "stop"),
            chunk({}, usage={"prompt_tokens": 5, "completion_tokens": 7}),
            "[DONE]",
        ],
    )
    turn = accumulator.turn()
    assert [part.kind for part in turn.message.parts] == ["thinking", "text"]
    assert (turn.thinking_text, turn.text) == ("Thinking.", "Hello")
    assert turn.stop_reason == "stop"
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == (5, 7)
    assert (turn.response_id, turn.model) == ("chatcmpl-1", "local-model")


def test_chat_done_alone_is_terminal() -> None:
    accumulator = run(ChatParser(), [chunk({"content": "Hi"}), "[DONE]"])
    assert accumulator.completed and accumulator.stop_reason is None


def test_chat_without_finish_or_done_is_not_complete() -> None:
    assert not run(ChatParser(), [chunk({"content": "Hi"})]).completed


def test_chat_tool_calls_without_index_as_gemini_sends_them() -> None:
    def call(call_id: str, name: str | None, arguments: str) -> dict[str, Any]:
        function = (
            {"arguments": arguments} if name is None else {"name": name, "arguments": arguments}
        )
        return {"id": call_id, "type": "function", "function": function}

    accumulator = run(
        ChatParser(),
        [
            chunk({"tool_calls": [call("fc-1", "a", '{"x":')]}),
            chunk({"tool_calls": [{"function": {"arguments": " 1}"}}]}),
            chunk({"tool_calls": [call("fc-2", "b", "{}")]}),
            chunk({"tool_calls": [call("fc-2", None, "")]}),
            chunk({}, "stop"),
        ],
    )
    calls = accumulator.turn().tool_calls
    assert [(c.call_id, c.name, c.arguments) for c in calls] == [
        ("fc-1", "a", {"x": 1}),
        ("fc-2", "b", {}),
    ]


def test_chat_tool_call_without_id_gets_one() -> None:
    accumulator = run(
        ChatParser(),
        [
            chunk({"tool_calls": [{"index": 0, "function": {"name": "f", "arguments": "{}"}}]}),
            chunk({}, "tool_calls"),
        ],
    )
    assert [c.call_id for c in accumulator.turn().tool_calls] == ["call_0"]


@pytest.mark.parametrize(
    ("error", "retryable"),
    [
        ({"message": "Internal error", "type": "server_error", "code": None}, True),
        ({"message": "quota", "type": "insufficient_quota", "code": "insufficient_quota"}, False),
        ("upstream died", True),
    ],
)
def test_chat_error_chunk_raises(error: Any, retryable: bool) -> None:
    parser = ChatParser()
    parser.feed(sse(chunk({"content": "Hi"})))
    with pytest.raises(ProviderStreamError) as raised:
        parser.feed(sse({"error": error}))
    assert raised.value.retryable is retryable


def test_chat_tool_call_without_a_name_is_a_protocol_error() -> None:
    with pytest.raises(ProviderProtocolError):
        ChatParser().feed(sse(chunk({"tool_calls": [{"index": 0, "function": {}}]})))


# --- fuzz -----------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=8,
)
small_ints = st.integers(-1, 3)
short_text = st.text(max_size=6)
responses_items = st.fixed_dictionaries(
    {"type": st.sampled_from(["function_call", "reasoning", "message", "web_search_call"])},
    optional={
        "id": short_text | json_values,
        "call_id": short_text | json_values,
        "name": short_text | json_values,
        "arguments": st.sampled_from(["", "{}", '{"a": 1}', "{", "[1]"]) | json_values,
        "encrypted_content": short_text | json_values,
        "summary": json_values,
    },
)
responses_events = st.fixed_dictionaries(
    {
        "type": st.sampled_from(
            [
                "response.created",
                "response.output_item.added",
                "response.output_item.done",
                "response.output_text.delta",
                "response.reasoning_summary_text.delta",
                "response.function_call_arguments.delta",
                "response.function_call_arguments.done",
                "response.completed",
                "response.incomplete",
                "response.failed",
                "error",
                "response.unknown",
            ]
        )
    },
    optional={
        "output_index": small_ints | json_values,
        "delta": short_text | json_values,
        "arguments": short_text | json_values,
        "item": responses_items | json_values,
        "response": st.fixed_dictionaries(
            {},
            optional={
                "id": json_values,
                "status": json_values,
                "usage": json_values,
                "error": json_values,
            },
        )
        | json_values,
        "error": json_values,
        "code": json_values,
    },
)
chat_tool_calls = st.lists(
    st.fixed_dictionaries(
        {},
        optional={
            "index": small_ints | json_values,
            "id": short_text | json_values,
            "function": st.fixed_dictionaries(
                {},
                optional={
                    "name": short_text | json_values,
                    "arguments": st.sampled_from(["", "{", "}", '"a": 1']) | json_values,
                },
            )
            | json_values,
        },
    ),
    max_size=2,
)
chat_chunks = st.fixed_dictionaries(
    {
        "choices": st.lists(
            st.fixed_dictionaries(
                {},
                optional={
                    "index": small_ints | json_values,
                    "delta": st.fixed_dictionaries(
                        {},
                        optional={
                            "content": short_text | json_values,
                            "reasoning_content": short_text | json_values,
                            "reasoning": short_text | json_values,
                            "tool_calls": chat_tool_calls | json_values,
                        },
                    )
                    | json_values,
                    "finish_reason": st.sampled_from(["stop", "tool_calls"]) | json_values,
                },
            ),
            max_size=2,
        )
        | json_values
    },
    optional={"usage": json_values, "error": json_values, "id": json_values},
)
raw_data = st.sampled_from(["[DONE]", "", "{", "null", "[]"]) | st.text(max_size=10)


def _consume(parser: WireParser, stream: list[dict[str, Any] | str]) -> None:
    """Feed a whole stream and assemble the turn; only Grove's provider errors may escape."""
    accumulator = TurnAccumulator("openai", "gpt-5-mini")
    try:
        for event in stream:
            for parsed in parser.feed(sse(event)):
                accumulator.add(parsed)
        for parsed in parser.finish():
            accumulator.add(parsed)
        accumulator.turn()
    except ProviderError:
        pass


@settings(max_examples=400, deadline=None)
@given(stream=st.lists(responses_events | raw_data, max_size=8))
def test_responses_parser_takes_any_input(stream: list[dict[str, Any] | str]) -> None:
    _consume(ResponsesParser(), stream)


@settings(max_examples=400, deadline=None)
@given(stream=st.lists(chat_chunks | raw_data, max_size=8))
def test_chat_parser_takes_any_input(stream: list[dict[str, Any] | str]) -> None:
    _consume(ChatParser(), stream)


def test_chat_tool_calls_keep_geminis_thought_signatures() -> None:
    signed = {
        "id": "fc-1",
        "type": "function",
        "function": {"name": "look", "arguments": "{}"},
        "extra_content": {"google": {"thought_signature": "c2lnbmF0dXJl"}},
    }
    plain = {"id": "fc-2", "type": "function", "function": {"name": "look", "arguments": "{}"}}
    accumulator = run(
        ChatParser(),
        [chunk({"tool_calls": [signed]}), chunk({"tool_calls": [plain]}), chunk({}, "stop")],
    )
    assert [c.signature for c in accumulator.turn().tool_calls] == ["c2lnbmF0dXJl", None]
