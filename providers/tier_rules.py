"""Which price tier an agent's requests go on (SPEC 20): a tier's name checked, the tier a
provider serves it on (Anthropic has no flex: batch instead), and what flex requests need.
"""

from __future__ import annotations

from grove.providers.base import TIERS, ProviderName, Tier
from grove.providers.errors import GroveError, ProviderError, ProviderHTTPError

# The vendors with a flex tier on their ordinary endpoints (`service_tier: "flex"`).
FLEX_PROVIDERS: frozenset[str] = frozenset({"openai", "google"})
# OpenAI's flex guide raises the client's timeout from 10 to 15 minutes: a flex request may
# queue for capacity before its first byte. Gemini's flex targets 1 to 15 minutes as well.
FLEX_READ_TIMEOUT_S = 900.0
# What `--help` and the docs say of each tier.
TIER_HELP = (
    "standard: the vendor's ordinary price and speed; flex: half price on the ordinary "
    "endpoint, slower, sometimes refused for want of capacity (OpenAI, Gemini; Anthropic has "
    "none and uses batch); batch: half price through the vendor's batch API, each step's "
    "answer within minutes (hours at worst)"
)


class UnknownTierError(GroveError, ValueError):
    """A tier name Grove does not know; `str()` is the one line the user sees."""


def checked_tier(text: str) -> Tier:
    """`text` as a tier, or UnknownTierError naming the tiers there are."""
    for tier in TIERS:
        if text == tier:
            return tier
    raise UnknownTierError(f"unknown tier {text!r}: the tiers are {', '.join(TIERS)}")


def served_tier(provider: str | None, tier: Tier) -> Tier:
    """The tier `provider` serves a request asked on `tier` at: flex where it has none is
    batch, the other half-price tier."""
    if tier == "flex" and provider is not None and provider not in FLEX_PROVIDERS:
        return "batch"
    return tier


def replaced_text(provider: str | None, model: str | None, tier: str | None) -> str | None:
    """What an agent asked onto `tier` says once when its provider serves it on another."""
    if tier != "flex" or provider is None or served_tier(provider, "flex") == "flex":
        return None
    return (
        f"{provider} has no flex tier: {model or 'the agent'} runs on the batch tier instead "
        "(the same half price; each step waits for its batch)"
    )


def flex_unavailable(provider: ProviderName, tier: Tier, error: ProviderError) -> bool:
    """Whether `error` may be a flex request refused for want of capacity: OpenAI's 429
    `resource_unavailable`, Gemini's 429 `RESOURCE_EXHAUSTED` (which a rate limit answers
    too: taken alike) or a 503; never an error another attempt cannot mend."""
    if tier != "flex" or provider not in FLEX_PROVIDERS:
        return False
    return isinstance(error, ProviderHTTPError) and error.status in (429, 503) and error.retryable
