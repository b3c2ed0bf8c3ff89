"""`BatchPlan`: how the supervisor's collectors run provider batches (`[tiers]`), and where
each provider is reached from the supervisor, as its hosts reach it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from grove.providers.http import Endpoint

ACCOUNT_CHARS = 16
POLL_AGE_SHARE = 0.1  # an open batch is polled at most this share of its age apart


@dataclass(frozen=True, kw_only=True, slots=True)
class BatchPlan:
    """`window_s`: how long a collector gathers steps before it sends them; `size`: how many
    it sends at once without waiting out the window (each batch within the vendor's limits
    too); `tries`: how many times a step goes in a batch before the standard tier takes it
    (its results errored or expired; None: it stays on the batch tier); `poll_s` up to
    `poll_max_s`: how often an open batch is asked whether it ended, backing off as it ages
    (`poll_wait`)."""

    window_s: float = 5.0
    size: int = 1000
    tries: int | None = None
    poll_s: float = 1.0
    poll_max_s: float = 60.0
    base_urls: dict[str, str | None] = field(default_factory=dict)
    simulator: Endpoint | None = None  # fixes URL and key for every provider
    openai_api: str = "responses"  # `[providers.openai] api`: what OpenAI's batches hold

    def poll_wait(self, age_s: float) -> float:
        """How long to wait before asking again whether a batch `age_s` old ended: `poll_s`
        while it is young, then a share of its age (so it is seen ended at most that share
        late, and a batch of hours is not asked every second), at most `poll_max_s`."""
        return min(max(self.poll_s, age_s * POLL_AGE_SHARE), self.poll_max_s)


def account(endpoint: Endpoint) -> str:
    """A name for the key an endpoint signs in with, the same for the same key and URL: a
    fingerprint that is kept and logged instead of the key."""
    digest = hashlib.sha256(f"{endpoint.base_url}\n{endpoint.api_key}".encode())
    return digest.hexdigest()[:ACCOUNT_CHARS]
