"""Rate limits as token buckets: requests and input tokens a minute, refilled continuously, a
request taken whole or not at all. The simulator enforces them; the supervisor keeps a fleet's.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from grove.providers.stream_events import RateLimitLeft

SECONDS_PER_MINUTE = 60.0


@dataclass(frozen=True, slots=True)
class Quota:
    """One limit as an answer reports it: the limit, what is left, seconds until full."""

    limit: int
    remaining: int
    reset_s: float


@dataclass(frozen=True, slots=True)
class Admission:
    allowed: bool
    retry_after: float  # seconds until the request would be admitted (0 when it was)
    requests: Quota | None
    tokens: Quota | None


class _Bucket:
    def __init__(self, per_minute: int, now: float, burst: float) -> None:
        self.capacity = max(1.0, per_minute * burst)
        self.rate = per_minute / SECONDS_PER_MINUTE
        self.level = self.capacity
        self.updated = now

    def refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + (now - self.updated) * self.rate)
        self.updated = now

    def wait_for(self, cost: float) -> float:
        """Seconds until `cost` fits (0: it fits now); a cost above the capacity counts as
        the capacity, so one large request is slow, never impossible."""
        missing = min(cost, self.capacity) - self.level
        return max(0.0, missing / self.rate)

    def quota(self) -> Quota:
        return Quota(
            limit=int(self.capacity),
            remaining=int(self.level),
            reset_s=(self.capacity - self.level) / self.rate,
        )


class RateLimiter:
    """`rpm` requests and `tpm` input tokens a minute (None: that one is not limited). A full
    bucket holds a minute's worth, or `burst` of it."""

    def __init__(
        self,
        rpm: int | None,
        tpm: int | None,
        clock: Callable[[], float] = time.monotonic,
        *,
        burst: float = 1.0,
    ) -> None:
        now = clock()
        self._clock = clock
        self._requests = _Bucket(rpm, now, burst) if rpm else None
        self._tokens = _Bucket(tpm, now, burst) if tpm else None
        self._lock = threading.Lock()

    def observe(self, remaining: RateLimitLeft, share: float = 1.0) -> None:
        """The provider says less is left than the buckets hold (another client on the same
        key, a lower limit than configured): lower them to `share` of that."""
        with self._lock:
            now = self._clock()
            for bucket, left in (
                (self._requests, remaining.requests),
                (self._tokens, remaining.tokens),
            ):
                if bucket is not None and left is not None:
                    bucket.refill(now)
                    bucket.level = min(bucket.level, left * share)

    def admit(self, tokens: int) -> Admission:
        """Take one request of `tokens` input tokens if both buckets hold it, else nothing."""
        with self._lock:
            now = self._clock()
            costs = [(self._requests, 1.0), (self._tokens, float(tokens))]
            waits = []
            for bucket, cost in costs:
                if bucket is not None:
                    bucket.refill(now)
                    waits.append(bucket.wait_for(cost))
            retry_after = max(waits, default=0.0)
            if retry_after == 0.0:
                for bucket, cost in costs:
                    if bucket is not None:
                        bucket.level -= min(cost, bucket.capacity)
            return Admission(
                allowed=retry_after == 0.0,
                retry_after=retry_after,
                requests=self._requests.quota() if self._requests else None,
                tokens=self._tokens.quota() if self._tokens else None,
            )


# The headers that carry what is left: Anthropic's (input tokens are what Grove's buckets count,
# where given) and OpenAI's; Gemini sends none.
_REMAINING_HEADERS = (
    ("anthropic-ratelimit-requests-remaining", "anthropic-ratelimit-input-tokens-remaining"),
    ("x-ratelimit-remaining-requests", "x-ratelimit-remaining-tokens"),
)


def remaining_from_headers(headers: Mapping[str, str]) -> RateLimitLeft | None:
    """The rate-limit headers of a provider's answer, read; None when it sends none. Values
    that are not whole numbers are ignored."""
    for requests_name, tokens_name in _REMAINING_HEADERS:
        requests = _whole(headers.get(requests_name))
        tokens = _whole(headers.get(tokens_name))
        if tokens is None and requests_name.startswith("anthropic"):
            tokens = _whole(headers.get("anthropic-ratelimit-tokens-remaining"))
        if requests is not None or tokens is not None:
            return RateLimitLeft(requests=requests, tokens=tokens)
    return None


def _whole(value: str | None) -> int | None:
    if value is None or not value.strip().isdigit():
        return None
    return int(value.strip())
