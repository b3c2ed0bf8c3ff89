"""Rate limits for the fleet: one set of buckets per provider (`[providers.NAME] rpm`, `tpm`,
`max_concurrency`) in the supervisor, which every host asks before each request, and one
cooldown per provider that a 429 with retry-after sets for all.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from grove.providers.ratelimit import RateLimiter
from grove.providers.stream_events import RateLimitLeft

# The fleet's buckets refill at the configured rates but hold a little less than the
# provider's: a request admitted here reaches the provider a few milliseconds later, and the
# provider's bucket, refilled at the same rate from a fuller start, is then never short.
HEADROOM = 0.95


@dataclass(frozen=True, slots=True)
class ProviderLimits:
    rpm: int | None = None
    tpm: int | None = None
    max_concurrency: int | None = None

    @property
    def any(self) -> bool:
        return bool(self.rpm or self.tpm or self.max_concurrency)


# How soon a request that found every slot taken asks again.
SLOT_POLL_S = 0.05


@dataclass(slots=True)
class _Lane:
    limiter: RateLimiter | None
    max_concurrency: int | None
    in_flight: int = 0
    cooldown_until: float = 0.0


class FleetLimiter:
    """Requests wait for room here instead of earning 429s. Each host asks for its agents'
    requests together (actors/coalesce.py); one that cannot go yet is told how long to wait
    before it asks again."""

    def __init__(self, limits: dict[str, ProviderLimits]) -> None:
        self._lanes = {
            provider: _Lane(
                limiter=(
                    RateLimiter(chosen.rpm, chosen.tpm, burst=HEADROOM)
                    if chosen.rpm or chosen.tpm
                    else None
                ),
                max_concurrency=chosen.max_concurrency,
            )
            for provider, chosen in limits.items()
            if chosen.any
        }

    @property
    def providers(self) -> frozenset[str]:
        return frozenset(self._lanes)

    def try_acquire(self, provider: str, tokens: int) -> float:
        """Take a slot and room in the buckets for a request of `tokens` input tokens: 0.0
        when it may go now, else the seconds to wait before asking again (a cooldown's end,
        the buckets' refill, a moment for a slot)."""
        lane = self._lanes.get(provider)
        if lane is None:
            return 0.0
        cooling = lane.cooldown_until - time.monotonic()
        if cooling > 0:
            return cooling
        if lane.max_concurrency is not None and lane.in_flight >= lane.max_concurrency:
            return SLOT_POLL_S
        if lane.limiter is not None:
            admission = lane.limiter.admit(tokens)
            if not admission.allowed:
                return max(admission.retry_after, 0.001)
        lane.in_flight += 1
        return 0.0

    def release(self, provider: str, left: RateLimitLeft | None = None) -> None:
        """A request ended: its slot is free. `left`: what the provider's headers said is left
        on the key; where that is less than the buckets hold (another client on the key, a
        lower limit than configured), they shrink to it."""
        lane = self._lanes.get(provider)
        if lane is None:
            return
        lane.in_flight = max(lane.in_flight - 1, 0)
        if left is not None and lane.limiter is not None:
            lane.limiter.observe(left, HEADROOM)

    def cool_down(self, provider: str, seconds: float) -> None:
        """A request on `provider` met a 429 asking to wait `seconds`: every request on it
        waits until then."""
        lane = self._lanes.get(provider)
        if lane is not None:
            lane.cooldown_until = max(lane.cooldown_until, time.monotonic() + seconds)
