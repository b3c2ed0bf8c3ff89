"""Retry timing: jittered exponential backoff and the servers' own retry hints.

Which errors are retryable is decided by the error classes (providers.errors), not here.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from time import time

from httpx import Headers

MAX_HONOURED_RETRY_AFTER_S = 120.0
MAX_DOUBLINGS = 64


@dataclass(frozen=True, kw_only=True, slots=True)
class RetryPolicy:
    """`max_attempts` counts the first try. Delays double from `base_delay_s` up to a cap.
    `flex_fallback`: a flex request still refused for want of capacity after its tries goes
    on the standard tier (at the standard price) instead of failing (`[tiers] flex_fallback`)."""

    max_attempts: int = 6
    base_delay_s: float = 0.5
    max_delay_s: float = 30.0
    flex_fallback: bool = False

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait after failed attempt number `attempt` (1-based)."""
        if retry_after is not None:
            # The server named a time: wait at least that long, plus a little spread so that
            # many agents throttled together do not all come back in the same instant.
            hinted = min(max(retry_after, 0.0), MAX_HONOURED_RETRY_AFTER_S)
            spread: float = random.uniform(0.0, min(0.25, hinted * 0.1 + 0.05))
            return hinted + spread
        doublings = min(attempt - 1, MAX_DOUBLINGS)  # a larger power would overflow a float
        ceiling = min(self.max_delay_s, self.base_delay_s * 2.0**doublings)
        return ceiling / 2 + random.uniform(0.0, ceiling / 2)


def retry_after_from_headers(headers: Headers) -> float | None:
    """`retry-after-ms` (milliseconds) first, then `retry-after` (seconds or an HTTP date)."""
    milliseconds = _non_negative_number(headers.get("retry-after-ms", ""))
    if milliseconds is not None:
        return milliseconds / 1000.0
    value = headers.get("retry-after")
    if value is None:
        return None
    seconds = _non_negative_number(value)
    if seconds is not None:
        return seconds
    try:
        return max(parsedate_to_datetime(value).timestamp() - time(), 0.0)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def parse_duration(text: str) -> float | None:
    """A protobuf Duration in JSON form (`"1.5s"`), as Gemini's RetryInfo.retryDelay uses."""
    if not text.endswith("s"):
        return None
    return _non_negative_number(text[:-1])


def _non_negative_number(text: str) -> float | None:
    """A number, clamped at zero; None for anything else (including nan and infinities)."""
    try:
        value = float(text)
    except ValueError:
        return None
    return max(value, 0.0) if math.isfinite(value) else None
