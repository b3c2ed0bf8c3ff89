"""A whole (non-streamed) Messages reply read as Grove's `AssistantTurn`: the message's parts
fed through the stream parser as the events that would have streamed them, so both agree.
"""

from __future__ import annotations

from grove.providers.anthropic import PROVIDER
from grove.providers.anthropic.stream import AnthropicStreamParser
from grove.providers.base import AssistantTurn, JSONObject
from grove.providers.batch_support import batch_turn
from grove.providers.errors import ProviderProtocolError
from grove.providers.stream_events import StreamEvent


def reply_turn(message: JSONObject) -> AssistantTurn:
    """The turn a `message` object holds, priced at the batch tier (ProviderProtocolError for
    one that is not a Messages reply)."""
    content = message.get("content")
    if message.get("type") != "message" or not isinstance(content, list):
        raise ProviderProtocolError(
            "anthropic: a batch result's message is not a Messages reply", provider=PROVIDER
        )
    parser = AnthropicStreamParser()
    head = {key: value for key, value in message.items() if key != "content"}
    events: list[StreamEvent] = parser.feed_json("message_start", {"message": head})
    for index, block in enumerate(content):
        if not isinstance(block, dict):
            raise ProviderProtocolError(
                f"anthropic: content block {index} is not an object", provider=PROVIDER
            )
        events += parser.feed_json("content_block_start", {"index": index, "content_block": block})
    events += parser.feed_json(
        "message_delta", {"delta": {"stop_reason": message.get("stop_reason")}}
    )
    events += parser.feed_json("message_stop", {})
    return batch_turn(PROVIDER, events)
