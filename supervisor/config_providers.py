"""The config sections of models and providers: `[defaults]`, `[providers]` (with `retry`),
`[models]`, `[cache]` and `[tiers]`; what a request is sent to, how retried, priced and cached.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from grove.providers.base import TIERS, CachePolicy, ProviderName, Tier
from grove.providers.pricing import checked_prices
from grove.providers.retry import RetryPolicy
from grove.providers.tier_rules import TIER_HELP, checked_tier
from grove.supervisor.config_fields import ConfigSection, UsableUrl, checked_model_spec


class Defaults(ConfigSection):
    model: str | None = Field(default=None, description="MODEL[/THINKING] for new root agents")
    tier: Tier = Field(
        default="standard", description=f"Price tier of new root agents: {TIER_HELP}"
    )

    @field_validator("model")
    @classmethod
    def _valid_spec(cls, value: str | None) -> str | None:
        return None if value is None else checked_model_spec(value)

    @field_validator("tier", mode="before")
    @classmethod
    def _valid_tier(cls, value: object) -> Tier:
        if not isinstance(value, str):
            raise ValueError(f"a tier is a name ({', '.join(TIERS)}), not {value!r}")
        return checked_tier(value)


class ProviderSettings(ConfigSection):
    base_url: UsableUrl | None = None
    api: Literal["responses", "chat"] = "responses"
    # The fleet's limits on this provider, shared by every host (supervisor/fleet.py).
    rpm: int | None = Field(default=None, ge=1, description="Requests a minute")
    tpm: int | None = Field(default=None, ge=1, description="Input tokens a minute")
    max_concurrency: int | None = Field(default=None, ge=1, description="Requests at once")


DEFAULT_RETRY = RetryPolicy()  # the defaults live in providers/retry.py only


class RetrySection(ConfigSection):
    """`[providers.retry]`: how a failed request is tried again (every provider, every host);
    a server's own retry-after still wins over the delays."""

    attempts: int = Field(
        default=DEFAULT_RETRY.max_attempts,
        ge=1,
        le=20,
        description="Tries of a request, the first too",
    )
    base_delay_s: float = Field(
        default=DEFAULT_RETRY.base_delay_s,
        gt=0,
        le=60,
        allow_inf_nan=False,
        description="Wait after the first failure",
    )
    max_delay_s: float = Field(
        default=DEFAULT_RETRY.max_delay_s,
        gt=0,
        le=600,
        allow_inf_nan=False,
        description="Cap of the doubling waits",
    )

    @model_validator(mode="after")
    def _ordered(self) -> RetrySection:
        if self.base_delay_s > self.max_delay_s:
            raise ValueError(
                f"base_delay_s ({self.base_delay_s:g}) is more than max_delay_s "
                f"({self.max_delay_s:g})"
            )
        return self

    def policy(self, flex_fallback: bool = False) -> RetryPolicy:
        """These tries; `flex_fallback` is `[tiers]`'s."""
        return RetryPolicy(
            max_attempts=self.attempts,
            base_delay_s=self.base_delay_s,
            max_delay_s=self.max_delay_s,
            flex_fallback=flex_fallback,
        )


class Providers(ConfigSection):
    anthropic: ProviderSettings = ProviderSettings()
    openai: ProviderSettings = ProviderSettings()
    google: ProviderSettings = ProviderSettings()
    retry: RetrySection = RetrySection()

    def for_provider(self, provider: ProviderName) -> ProviderSettings:
        settings: ProviderSettings = getattr(self, provider)
        return settings


class Models(ConfigSection):
    aliases: dict[str, str] = Field(default_factory=dict)
    prices: dict[str, list[float]] = Field(
        default_factory=dict,
        description="USD per million input, output[, cache read, cache write] tokens, by model id",
    )

    @field_validator("prices")
    @classmethod
    def _prices(cls, prices: dict[str, list[float]]) -> dict[str, list[float]]:
        checked_prices(prices)
        return prices


class CacheSection(ConfigSection):
    """`[cache]`: provider prompt caching that follows the agent tree (on by default)."""

    enabled: bool = Field(default=True, description="Use the providers' caches")
    ttl: Literal["5m", "1h"] = Field(
        default="5m", description="How long a cached prefix lives (Anthropic; Gemini entries)"
    )

    def policy(self) -> CachePolicy | None:
        """What the requests ask for; None when caching is off."""
        return CachePolicy(ttl=self.ttl) if self.enabled else None


class TiersSection(ConfigSection):
    """`[tiers]`: how requests on the half-price tiers go (SPEC 20). A batch-tier step's request
    joins its provider's rolling batch, sent `batch_window_s` after the batch's first request
    or at `batch_size` requests, whichever comes first (split further at the vendor's limits)."""

    batch_window_s: float = Field(
        default=5.0,
        gt=0,
        le=3600,
        allow_inf_nan=False,
        description="Longest a request waits for its batch to be sent",
    )
    batch_size: int = Field(
        default=1000, ge=1, le=100_000, description="Requests that send a batch at once"
    )
    batch_tries: int | None = Field(
        default=None,
        ge=1,
        le=100,
        description="Tries of an errored or expired request on the batch tier before it goes "
        "on the standard tier (unset: it stays on the batch tier)",
    )
    flex_fallback: bool = Field(
        default=False,
        description="A flex request refused for want of capacity after its [providers.retry] "
        "attempts goes on the standard tier, at the standard price, instead of failing",
    )
