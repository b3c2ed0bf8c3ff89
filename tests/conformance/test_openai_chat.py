"""The Chat Completions corpus through ChatParser: whole, bytewise and split at every offset.

Beyond the common fields: the terminal signal, the response id and model, Grove's usage.
"""

from __future__ import annotations

from typing import Any

import pytest

from grove.providers.accumulate import TurnAccumulator
from grove.providers.base import ToolCallPart
from grove.providers.openai.chat import OpenAIChatWire
from tests.conformance.corpus import assert_conforms, body, decode_all, entries, entry_ids

API = "openai-chat"


@pytest.mark.parametrize("entry", entries(API), ids=entry_ids(API))
def test_stream_conforms(entry: dict[str, Any]) -> None:
    outcome = assert_conforms(OpenAIChatWire().new_parser, entry)
    assert outcome.error is None
    assert outcome.completed


def _accumulate(entry: dict[str, Any]) -> TurnAccumulator:
    parser = OpenAIChatWire().new_parser()
    accumulator = TurnAccumulator("openai", "unset")
    for sse in decode_all([body(entry)]):
        for event in parser.feed(sse):
            accumulator.add(event)
    for event in parser.finish():
        accumulator.add(event)
    return accumulator


@pytest.mark.parametrize("entry", entries(API), ids=entry_ids(API))
def test_turn_carries_response_id_model_and_usage(entry: dict[str, Any]) -> None:
    accumulator = _accumulate(entry)
    want = entry["expected"]
    turn = accumulator.turn()
    assert turn.response_id == want["id"]
    assert turn.model == want["model"]
    assert turn.usage.input_tokens == want["usage"]["prompt_tokens"]
    assert turn.usage.output_tokens == want["usage"]["completion_tokens"]
    details = want["usage"]["completion_tokens_details"]
    assert turn.usage.thinking_tokens == details["reasoning_tokens"]


def test_parallel_calls_keep_their_ids_and_order() -> None:
    (entry,) = [e for e in entries(API) if e["file"].endswith("parallel_tool_calls.sse")]
    calls = _accumulate(entry).turn().tool_calls
    assert [call.name for call in calls] == ["GetWeatherArgs", "get_stock_price"]
    assert all(
        isinstance(call, ToolCallPart) and call.call_id.startswith("call_") for call in calls
    )
    assert len({call.call_id for call in calls}) == 2


def test_only_the_first_choice_makes_the_text() -> None:
    (entry,) = [e for e in entries(API) if e["file"].endswith("multiple_choices_n3.sse")]
    choices = entry["expected"]["choices"]
    assert len({choice["content"] for choice in choices}) == 3
    assert _accumulate(entry).text == choices[0]["content"]
