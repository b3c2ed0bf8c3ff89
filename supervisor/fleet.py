"""Rate limits for the fleet: one set of buckets per provider (`[providers.NAME] rpm`, `tpm`,
`max_concurrency`) in the supervisor, which every host asks before each request, and one
cooldown per provider that a 429 with retry-after sets for all.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from providers.ratelimit import RateLimiter

# The fleet runs its buckets a little under the configured limits: a request admitted here
# reaches the provider a few milliseconds later, when the provider's own bucket may be a
# fraction of a token short.
HEADROOM = 0.95


def _under(limit: int | None) -> int | None:
    return max(1, int(limit * HEADROOM)) if limit else None


@dataclass(frozen=True, slots=True)
class ProviderLimits:
    rpm: int | None = None
    tpm: int | None = None
    max_concurrency: int | None = None

    @property
    def any(self) -> bool:
        return bool(self.rpm or self.tpm or self.max_concurrency)


@dataclass(slots=True)
class _Lane:
    limiter: RateLimiter | None
    concurrency: asyncio.Semaphore | None
    cooldown_until: float = 0.0


class FleetLimiter:
    """Requests wait here instead of earning 429s."""

    def __init__(self, limits: dict[str, ProviderLimits]) -> None:
        self._lanes = {
            provider: _Lane(
                limiter=(
                    RateLimiter(_under(chosen.rpm), _under(chosen.tpm))
                    if chosen.rpm or chosen.tpm
                    else None
                ),
                concurrency=(
                    asyncio.Semaphore(chosen.max_concurrency) if chosen.max_concurrency else None
                ),
            )
            for provider, chosen in limits.items()
            if chosen.any
        }

    @property
    def providers(self) -> frozenset[str]:
        return frozenset(self._lanes)

    async def acquire(self, provider: str, tokens: int) -> float:
        """Wait for a cooldown to end, a free slot and room in the buckets, then take it.
        Returns the seconds waited."""
        lane = self._lanes.get(provider)
        if lane is None:
            return 0.0
        started = time.monotonic()
        if lane.concurrency is not None:
            await lane.concurrency.acquire()
        try:
            while True:
                cooling = lane.cooldown_until - time.monotonic()
                if cooling > 0:
                    await asyncio.sleep(cooling)
                    continue
                if lane.limiter is None:
                    break
                admission = lane.limiter.admit(tokens)
                if admission.allowed:
                    break
                await asyncio.sleep(admission.retry_after)
        except BaseException:
            if lane.concurrency is not None:
                lane.concurrency.release()
            raise
        return time.monotonic() - started

    def release(self, provider: str) -> None:
        lane = self._lanes.get(provider)
        if lane is not None and lane.concurrency is not None:
            lane.concurrency.release()

    def cool_down(self, provider: str, seconds: float) -> None:
        """A request on `provider` met a 429 asking to wait `seconds`: every request on it
        waits until then."""
        lane = self._lanes.get(provider)
        if lane is not None:
            lane.cooldown_until = max(lane.cooldown_until, time.monotonic() + seconds)
