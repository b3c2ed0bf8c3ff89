"""A whole (non-streamed) Gemini `GenerateContentResponse` read as Grove's `AssistantTurn`:
fed to the stream parser as the one chunk it is, so both paths agree on every part.
"""

from __future__ import annotations

from grove.providers.base import AssistantTurn, JSONObject
from grove.providers.batch_support import batch_turn
from grove.providers.google import PROVIDER
from grove.providers.google.stream import GeminiStreamParser


def reply_turn(response: JSONObject) -> AssistantTurn:
    """The turn `response` holds, priced at the batch tier (ProviderProtocolError for one
    that is not a finished reply; ProviderStreamError for a blocked prompt)."""
    parser = GeminiStreamParser()
    events = parser.feed_json(response)
    events += parser.finish()
    return batch_turn(PROVIDER, events)
