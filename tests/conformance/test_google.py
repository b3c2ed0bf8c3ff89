"""The Gemini corpus through GeminiStreamParser: whole, bytewise and split at every offset.

Beyond the common fields: response ids, where thought signatures land and that they go back
to Gemini on the parts they came with, and blocked prompts as final, non-retryable errors.
"""

from __future__ import annotations

from typing import Any

import pytest

from grove.providers.accumulate import TurnAccumulator
from grove.providers.base import Message, Request
from grove.providers.errors import ProviderError, ProviderStreamError
from grove.providers.google.request import build_body
from grove.providers.google.stream import TEXT_SIGNATURE_DATA
from grove.providers.google.wire import GoogleWire
from grove.providers.stream_events import (
    ResponseInfo,
    StreamEvent,
    ThinkingSignature,
    ToolCallStart,
)
from tests.conformance.corpus import assert_conforms, body, decode_all, entries, entry_ids, expected

API = "gemini-generate"
SIGNATURE_KIND_OF_PART = {"text": "text", "thought": "thought", "functionCall": "functionCall"}


def stream_events(entry: dict[str, Any]) -> tuple[list[StreamEvent], ProviderError | None]:
    """Every event the parser gives for the whole body, and the error it ended with."""
    parser = GoogleWire().new_parser()
    events: list[StreamEvent] = []
    try:
        for sse in decode_all([body(entry)]):
            events.extend(parser.feed(sse))
        events.extend(parser.finish())
    except ProviderError as exc:
        return events, exc
    return events, None


def signature_kinds(events: list[StreamEvent]) -> list[str]:
    """Which kind of Gemini part each distinct signature came on."""
    kinds: dict[tuple[int, str], str] = {}
    for event in events:
        if isinstance(event, ThinkingSignature) and event.signature:
            text = event.provider_data == TEXT_SIGNATURE_DATA
            kinds[(event.index, event.signature)] = "text" if text else "thought"
        elif isinstance(event, ToolCallStart) and event.signature:
            kinds[(event.index, event.signature)] = "functionCall"
    return sorted(kinds.values())


@pytest.mark.parametrize("entry", entries(API), ids=entry_ids(API))
def test_stream_conforms(entry: dict[str, Any]) -> None:
    outcome = assert_conforms(GoogleWire().new_parser, entry)
    want = expected(entry)
    assert outcome.completed == (want["stop_reason"] is not None)
    if "prompt_block" in want:
        assert isinstance(outcome.error, ProviderStreamError)
        assert outcome.error.kind == "prompt_blocked"
        assert not outcome.error.retryable
        assert want["prompt_block"]["blockReason"] in str(outcome.error)
    else:
        assert outcome.error is None


@pytest.mark.parametrize("entry", entries(API), ids=entry_ids(API))
def test_response_info_and_signatures(entry: dict[str, Any]) -> None:
    want = expected(entry)
    events, _ = stream_events(entry)
    infos = [event for event in events if isinstance(event, ResponseInfo)]
    assert (infos[-1].response_id if infos else None) == want["response_id"]
    assert (infos[-1].model if infos else None) == want["model"]
    wanted_kinds = sorted(SIGNATURE_KIND_OF_PART[on] for on in want["thought_signature_on"])
    assert signature_kinds(events) == wanted_kinds
    assert len(wanted_kinds) == want["thought_signature_count"]


@pytest.mark.parametrize(
    "entry",
    [e for e in entries(API) if expected(e)["stop_reason"] is not None],
    ids=[e["file"].split("/")[-1] for e in entries(API) if expected(e)["stop_reason"] is not None],
)
def test_reply_goes_back_with_its_signatures(entry: dict[str, Any]) -> None:
    """The assembled reply, sent back in the next request, keeps every signature on the part
    it came with; every tool call gets its own id."""
    want = expected(entry)
    events, error = stream_events(entry)
    assert error is None
    accumulator = TurnAccumulator("google", "gemini-2.5-flash")
    for event in events:
        accumulator.add(event)
    turn = accumulator.turn()
    calls = turn.tool_calls
    assert [call.signature is not None for call in calls] == [
        call["has_thought_signature"] for call in want["tool_calls"]
    ]
    assert len({call.call_id for call in calls}) == len(calls)
    follow_up = Request(model="gemini-2.5-flash", messages=(Message.user("question"), turn.message))
    body_json, _ = build_body(follow_up)
    model_parts = body_json["contents"][1]["parts"] if len(body_json["contents"]) > 1 else []
    sent_on = sorted(
        "functionCall" if "functionCall" in part else "thought" if part.get("thought") else "text"
        for part in model_parts
        if "thoughtSignature" in part
    )
    assert sent_on == sorted(SIGNATURE_KIND_OF_PART[on] for on in want["thought_signature_on"])
    sent_text = "".join(p["text"] for p in model_parts if "text" in p and not p.get("thought"))
    assert sent_text == (want["text"] or "")


def test_corpus_has_the_streams_this_suite_relies_on() -> None:
    names = entry_ids(API)
    assert len(names) == 49
    assert "js-genai_mldev_text_thought_signature.sse" in names
    assert "vercel-ai_google-stream-tool-call-arguments.sse" in names
    assert "firebase-vertexai_streaming-failure-prompt-blocked-safety.sse" in names
