"""What the simulator bills, as a provider bills it: requests, input and output tokens, prompt
tokens read from caches and written to them, in all, by API and by tier (standard, flex, batch).
"""

from __future__ import annotations

from grove.simulator.script import Inbound, Plan

COUNTS = (
    "requests",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "cold_writes",
)


def _counts() -> dict[str, int]:
    return dict.fromkeys(COUNTS, 0)


class Billing:
    """The answers a simulator began, as billed: every request read in full is billed its prompt,
    in whichever phase its client goes away; a stream whose client went away is billed the reply
    tokens written until then; one the simulator broke itself (a fault) is not billed, nor an
    error answer. `cold_writes` counts requests that wrote a cache with nothing read."""

    def __init__(self) -> None:
        self.total = _counts()
        self.by_api: dict[str, dict[str, int]] = {}
        self.by_tier: dict[str, dict[str, int]] = {}

    def record(self, api: str, tier: str, inbound: Inbound, plan: Plan, output: int) -> None:
        """A request answered on `tier` (`output`: the reply's tokens generated)."""
        for billed in (
            self.total,
            self.by_api.setdefault(api, _counts()),
            self.by_tier.setdefault(tier, _counts()),
        ):
            billed["requests"] += 1
            billed["input_tokens"] += inbound.input_tokens
            billed["output_tokens"] += output
            billed["cache_read_tokens"] += plan.cache.read
            billed["cache_write_tokens"] += plan.cache.written
            billed["cold_writes"] += bool(plan.cache.written and not plan.cache.read)
