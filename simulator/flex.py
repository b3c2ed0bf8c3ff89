"""Flex processing as the simulator serves it: which requests ask for it (OpenAI's and Gemini's
`service_tier`), the tier an answer reports, and the share refused for want of capacity.

Anthropic has no flex tier; its requests never ask for one here.
"""

from __future__ import annotations

import math
import threading
from typing import Any

from grove.simulator.wire import Reply

FLEX = "flex"
# OpenAI's flex guide: without capacity a flex request gets "a 429 Resource Unavailable error"
# and is not charged; the wording past that name is the simulator's.
OPENAI_UNAVAILABLE = (
    "Resource Unavailable: there is not enough capacity to serve this flex request now. You "
    "will not be charged for it. Please try again later, or send it without service_tier 'flex'."
)
# Google's text for a 429 when the shared capacity a request would run on is not available.
GEMINI_UNAVAILABLE = "Resource exhausted, please try again later."


def flex_requested(api_name: str, body: dict[str, Any]) -> bool:
    """Whether a request asks for the flex tier (Gemini's enum in any case, as its SDK sends it)."""
    if api_name == "google":
        tier = body.get("serviceTier", body.get("service_tier"))
    elif api_name.startswith("openai"):
        tier = body.get("service_tier")
    else:
        return False
    return isinstance(tier, str) and tier.lower() == FLEX


def openai_tier(body: dict[str, Any]) -> str:
    """The `service_tier` an OpenAI answer reports: "flex" when asked for, else "default"."""
    return FLEX if body.get("service_tier") == FLEX else "default"


class FlexGate:
    """Refuses `share` of the flex requests it sees, spread evenly: with 0.25, every fourth."""

    def __init__(self, share: float) -> None:
        self._share = share
        self._seen = 0
        self._lock = threading.Lock()
        self.refused = 0

    def refuses(self) -> bool:
        with self._lock:
            before = math.floor(self._seen * self._share + 1e-9)
            self._seen += 1
            refused = math.floor(self._seen * self._share + 1e-9) > before
            self.refused += refused
            return refused


def unavailable(api_name: str) -> Reply:
    """The vendor's answer to a flex request it has no capacity for."""
    if api_name == "google":
        error = {"code": 429, "message": GEMINI_UNAVAILABLE, "status": "RESOURCE_EXHAUSTED"}
        return Reply(status=429, body={"error": error})
    error = {
        "message": OPENAI_UNAVAILABLE,
        "type": "resource_unavailable",
        "param": None,
        "code": "resource_unavailable",
    }
    return Reply(status=429, body={"error": error})
