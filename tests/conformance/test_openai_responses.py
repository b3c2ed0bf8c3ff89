"""The Responses corpus through ResponsesParser: whole, bytewise and split at every offset.

Beyond the common fields: the failure stream's error, reasoning kept to be sent back.
"""

from __future__ import annotations

from typing import Any

import pytest

from grove.providers.accumulate import TurnAccumulator
from grove.providers.base import ThinkingPart
from grove.providers.errors import ProviderStreamError
from grove.providers.openai.responses import OpenAIResponsesWire, reasoning_item
from tests.conformance.corpus import assert_conforms, body, decode_all, entries, entry_ids, parse

API = "openai-responses"


def grove_entry(entry: dict[str, Any]) -> dict[str, Any]:
    """The manifest entry as Grove must read it. Grove declares only function tools, so a
    `custom_tool_call` (free-text input, no JSON arguments) is skipped, not a tool call."""
    calls = entry["expected"]["tool_calls"]
    kept = [call for call in calls if call.get("type", "function_call") == "function_call"]
    return {**entry, "expected": {**entry["expected"], "tool_calls": kept}}


@pytest.mark.parametrize("entry", entries(API), ids=entry_ids(API))
def test_stream_conforms(entry: dict[str, Any]) -> None:
    outcome = assert_conforms(OpenAIResponsesWire().new_parser, grove_entry(entry))
    response_error = entry["expected"].get("response_error")
    if response_error is None:
        assert outcome.error is None
        assert outcome.completed
    else:
        assert isinstance(outcome.error, ProviderStreamError)
        assert outcome.error.kind == response_error["code"]
        assert response_error["message"][:60] in str(outcome.error)
        assert not outcome.completed


def test_corpus_has_the_streams_this_suite_relies_on() -> None:
    names = entry_ids(API)
    assert "vercel-ai_openai-error.1.sse" in names
    assert "vercel-ai_github-copilot-id-rotation.1.sse" in names


def test_insufficient_quota_stream_error_is_not_retried() -> None:
    (entry,) = [e for e in entries(API) if e["file"].endswith("openai-error.1.sse")]
    outcome = parse(OpenAIResponsesWire().new_parser, [body(entry)])
    assert isinstance(outcome.error, ProviderStreamError)
    assert outcome.error.kind == "insufficient_quota"
    assert outcome.error.retryable is False
    assert outcome.stop_reason == "failed"


def test_custom_tool_call_is_skipped_while_the_rest_parses() -> None:
    (entry,) = [e for e in entries(API) if e["file"].endswith("openai-custom-tool.1.sse")]
    assert [call["type"] for call in entry["expected"]["tool_calls"]] == ["custom_tool_call"]
    outcome = parse(OpenAIResponsesWire().new_parser, [body(entry)])
    assert outcome.tool_calls == []
    assert outcome.stop_reason == "completed"
    assert outcome.completed and outcome.error is None


def _turn_parts(file_suffix: str) -> tuple[Any, ...]:
    (entry,) = [e for e in entries(API) if e["file"].endswith(file_suffix)]
    parser = OpenAIResponsesWire().new_parser()
    accumulator = TurnAccumulator("openai", "gpt-5-mini")
    for sse in decode_all([body(entry)]):
        for event in parser.feed(sse):
            accumulator.add(event)
    for event in parser.finish():
        accumulator.add(event)
    return accumulator.turn().message.parts


def test_reasoning_with_encrypted_content_is_kept_and_sent_back_whole() -> None:
    parts = _turn_parts("openai-reasoning-encrypted-content.1_response1of4.sse")
    thinking = parts[0]
    assert isinstance(thinking, ThinkingPart)
    assert thinking.text.startswith("**Calculating step-by-step using calculator**")
    assert thinking.provider == "openai"
    data = thinking.provider_data
    assert data is not None
    assert data["id"] == "rs_01830d662ab3856501693c321405c88190be3ab04d5782d5f9"
    # The encrypted content of output_item.done, not the (incomplete) one of .added.
    assert data["encrypted_content"].startswith("gAAAAABpPDIVOKrsHNZ0Gwso")
    assert data["summary"] == [{"type": "summary_text", "text": thinking.text}]
    item = reasoning_item(thinking)
    assert item == {"type": "reasoning", **data}


def test_id_rotation_keeps_one_part_per_output_item() -> None:
    parts = _turn_parts("vercel-ai_github-copilot-id-rotation.1.sse")
    assert [part.kind for part in parts] == ["thinking", "text"]
    thinking = parts[0]
    assert isinstance(thinking, ThinkingPart)
    # Copilot sends no encrypted content: nothing to send back, so no provider data.
    assert thinking.provider_data is None
    assert reasoning_item(thinking) is None


def test_reasoning_without_summary_or_encrypted_content_leaves_no_part() -> None:
    parts = _turn_parts("vercel-ai_openai-web-search-tool.1.sse")
    assert [part.kind for part in parts] == ["text"]
