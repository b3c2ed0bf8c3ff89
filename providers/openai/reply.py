"""Whole (non-streamed) OpenAI replies read as Grove's `AssistantTurn`: a Responses object and
a chat completion, each fed through its stream parser as the events that would have streamed it.
"""

from __future__ import annotations

from collections.abc import Iterator

from grove.providers.base import AssistantTurn, JSONObject
from grove.providers.batch_support import batch_turn
from grove.providers.errors import ProviderProtocolError
from grove.providers.openai import PROVIDER
from grove.providers.openai.chat_stream import ChatParser
from grove.providers.openai.responses_stream import ResponsesParser
from grove.providers.stream_events import StreamEvent
from grove.providers.wirejson import json_object, json_str

# The event that ends a stream of a response in each final status.
TERMINAL_EVENTS = {
    "completed": "response.completed",
    "incomplete": "response.incomplete",
    "failed": "response.failed",
}


def responses_turn(response: JSONObject) -> AssistantTurn:
    """The turn a Responses `response` holds, priced at the batch tier. A failed response
    raises its ProviderStreamError; one that is no response, ProviderProtocolError."""
    output = response.get("output")
    terminal = TERMINAL_EVENTS.get(json_str(response, "status") or "")
    if not isinstance(output, list) or terminal is None:
        raise ProviderProtocolError(
            "OpenAI batch result is not a finished Responses object", provider=PROVIDER
        )
    parser = ResponsesParser()
    events: list[StreamEvent] = parser.feed_json({"type": "response.created", "response": response})
    for index, item in enumerate(output):
        if not isinstance(item, dict):
            raise ProviderProtocolError(f"OpenAI output item {index} is not an object")
        for event in _item_deltas(index, item):
            events += parser.feed_json(event)
        done = {"type": "response.output_item.done", "output_index": index, "item": item}
        events += parser.feed_json(done)
    events += parser.feed_json({"type": terminal, "response": response})
    events += parser.finish()
    return batch_turn(PROVIDER, events)


def _item_deltas(index: int, item: JSONObject) -> Iterator[JSONObject]:
    """The text deltas that would have streamed `item`'s text: a message's output text, a
    reasoning item's summary and reasoning text (refusals are not kept, as in the stream)."""
    kind = item.get("type")
    if kind == "message":
        pieces = [("content", "output_text", "response.output_text.delta")]
    elif kind == "reasoning":
        pieces = [
            ("summary", "summary_text", "response.reasoning_summary_text.delta"),
            ("content", "reasoning_text", "response.reasoning_text.delta"),
        ]
    else:
        return
    for field, part_type, event_type in pieces:
        parts = item.get(field)
        for part in parts if isinstance(parts, list) else ():
            if isinstance(part, dict) and part.get("type") == part_type:
                text = json_str(part, "text")
                if text:
                    yield {"type": event_type, "output_index": index, "delta": text}


def chat_turn(completion: JSONObject) -> AssistantTurn:
    """The turn a chat `completion` holds (its choice 0), priced at the batch tier."""
    choices = completion.get("choices")
    first: JSONObject | None = None
    for choice in choices if isinstance(choices, list) else ():
        if isinstance(choice, dict) and choice.get("index", 0) == 0:
            first = choice
            break
    if first is None:
        raise ProviderProtocolError("OpenAI batch result is not a chat completion")
    chunk = {
        "id": completion.get("id"),
        "model": completion.get("model"),
        "choices": [
            {
                "index": 0,
                "delta": json_object(first, "message"),
                "finish_reason": first.get("finish_reason"),
            }
        ],
        "usage": completion.get("usage"),
    }
    return batch_turn(PROVIDER, ChatParser().feed_json(chunk))
