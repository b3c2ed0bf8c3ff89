"""The Anthropic wire against the recorded Messages streams of the shared conformance corpus.

Each stream is parsed whole, byte by byte and split at every offset (corpus.assert_conforms).
"""

from __future__ import annotations

from typing import Any

import pytest

from grove.providers.accumulate import INVALID_ARGUMENTS, TurnAccumulator
from grove.providers.anthropic.wire import AnthropicWire
from grove.providers.base import (
    Message,
    Part,
    Request,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from grove.providers.http import Endpoint
from tests.conformance.corpus import assert_conforms, body, decode_all, entries, entry_ids, expected

API = "anthropic-messages"
ANTHROPIC_ENTRIES = entries(API)
ENTRY_IDS = entry_ids(API)
KEPT_BLOCKS = {"text", "thinking", "tool_use", "server_tool_use"}


def _kept_blocks(content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Recorded blocks Grove keeps: no empty text, no server tool results, compaction..."""
    return [
        block
        for block in content
        if block["type"] in KEPT_BLOCKS and not (block["type"] == "text" and not block["text"])
    ]


def _can_be_sent_back(content: list[dict[str, Any]]) -> bool:
    """Complete replies with something to send; server tool calls are Anthropic's, not Grove's."""
    kept = _kept_blocks(content)
    return bool(kept) and all(
        block["type"] != "server_tool_use" and block.get("input_complete") is not False
        for block in kept
    )


SIGNED = [entry for entry in ANTHROPIC_ENTRIES if expected(entry)["thinking_signatures"]]
SENDABLE = [entry for entry in ANTHROPIC_ENTRIES if _can_be_sent_back(expected(entry)["content"])]


def test_the_corpus_holds_all_thirteen_anthropic_streams() -> None:
    assert len(ANTHROPIC_ENTRIES) == 13


@pytest.mark.parametrize("entry", ANTHROPIC_ENTRIES, ids=ENTRY_IDS)
def test_stream_conforms(entry: dict[str, Any]) -> None:
    outcome = assert_conforms(AnthropicWire().new_parser, entry)
    assert outcome.error is None
    # Every file ends with message_stop, which the EOF flush dispatches: each reply is complete.
    assert outcome.completed
    framing = entry["framing"]
    assert len(outcome.sse_events) == framing.get(
        "events_if_flushed_at_eof", framing["events_dispatched"]
    )


@pytest.mark.parametrize("entry", ANTHROPIC_ENTRIES, ids=ENTRY_IDS)
def test_reply_parts_match_the_recorded_content_blocks(entry: dict[str, Any]) -> None:
    accumulator = _accumulate(entry)
    want = expected(entry)
    assert (accumulator.response_id, accumulator.model) == (want["id"], want["model"])
    if any(block.get("input_complete") is False for block in want["content"]):
        # Cut-off arguments are the model's reply, not a broken stream: the call says why.
        (call,) = [part for part in accumulator.parts() if isinstance(part, ToolCallPart)]
        assert call.arguments[INVALID_ARGUMENTS].startswith("not valid JSON")
        return
    assert accumulator.parts() == _expected_parts(want["content"])


@pytest.mark.parametrize(
    "entry",
    SIGNED,
    ids=lambda entry: str(entry["file"]),
)
def test_thinking_signatures_are_kept(entry: dict[str, Any]) -> None:
    turn = _accumulate(entry).turn()
    signatures = [p.signature for p in turn.message.parts if isinstance(p, ThinkingPart)]
    assert signatures == expected(entry)["thinking_signatures"]


@pytest.mark.parametrize(
    "entry",
    SENDABLE,
    ids=lambda entry: str(entry["file"]),
)
def test_a_streamed_reply_goes_back_as_the_blocks_it_came_in(entry: dict[str, Any]) -> None:
    want = expected(entry)
    reply = _accumulate(entry).turn().message
    results: tuple[Part, ...] = tuple(
        ToolResultPart(call_id=call.call_id, name=call.name, content="done")
        for call in reply.parts
        if isinstance(call, ToolCallPart)
    )
    follow_up = Message(role="user", parts=results or (TextPart(text="Go on."),))
    request = Request(
        model=want["model"], messages=(Message.user("Hello"), reply, follow_up), thinking="med"
    )
    prepared = AnthropicWire().prepare(
        request, Endpoint(base_url="http://127.0.0.1:1", api_key="k")
    )
    assert prepared.body["messages"][1] == {
        "role": "assistant",
        "content": [_wire_block(block) for block in _kept_blocks(want["content"])],
    }


def _accumulate(entry: dict[str, Any]) -> TurnAccumulator:
    parser = AnthropicWire().new_parser()
    accumulator = TurnAccumulator("anthropic", "corpus")
    for sse in decode_all([body(entry)]):
        for event in parser.feed(sse):
            accumulator.add(event)
    return accumulator


def _expected_parts(content: list[dict[str, Any]]) -> tuple[Part, ...]:
    parts: list[Part] = []
    for block in _kept_blocks(content):
        if block["type"] == "text":
            parts.append(TextPart(text=block["text"]))
        elif block["type"] == "thinking":
            parts.append(
                ThinkingPart(
                    text=block["thinking"], signature=block["signature"], provider="anthropic"
                )
            )
        else:
            parts.append(
                ToolCallPart(call_id=block["id"], name=block["name"], arguments=block["input"])
            )
    return tuple(parts)


def _wire_block(block: dict[str, Any]) -> dict[str, Any]:
    if block["type"] == "text":
        return {"type": "text", "text": block["text"]}
    if block["type"] == "thinking":
        return {"type": "thinking", "thinking": block["thinking"], "signature": block["signature"]}
    return {"type": "tool_use", "id": block["id"], "name": block["name"], "input": block["input"]}
