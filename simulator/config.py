"""The simulator's settings: where it listens, the key it accepts, and its default pacing.

Per-request overrides come from `[[sim ...]]` directives (directives.py), not from here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

DEFAULT_API_KEY = "grove-simulator-key"
DEFAULT_TOKENS = 24
MAX_TOKENS = 100_000
# Cache features the simulator can refuse, as servers without them do: Anthropic's
# `cache_control`, OpenAI's `prompt_cache_key`, Gemini's `cachedContents`.
CACHE_FEATURES = ("cache_control", "prompt_cache_key", "cached_contents")


@dataclass(frozen=True, kw_only=True, slots=True)
class SimulatorConfig:
    """`port=0` picks a free port. `tps=0` streams without pause between tokens.

    `events_per_write` SSE events share one network write (one HTTP chunk).
    """

    host: str = "127.0.0.1"
    port: int = 0
    api_key: str = field(default=DEFAULT_API_KEY, repr=False)
    ttft_ms: float = 0.0
    tps: float = 0.0
    tokens: int = DEFAULT_TOKENS
    events_per_write: int = 1
    # Input tokens a request may carry: None for each model's window in the catalog (a model
    # the catalog does not know has none); a number for every model.
    context_window: int | None = None
    # Requests and input tokens a minute over all connections (None: unlimited); over them,
    # each provider's 429 with its rate-limit headers.
    rpm: int | None = None
    tpm: int | None = None
    # Every cache lifetime times this (0.001: a five-minute entry lasts 0.3 s), to test expiry.
    cache_ttl_scale: float = 1.0
    # Prompt tokens a second processed before the first token, those read from a cache aside
    # (0: the time to first token does not depend on the prompt), as caching shortens it.
    prefill_tps: float = 0.0
    refuse: frozenset[str] = frozenset()  # of CACHE_FEATURES
    # Provider batches (Anthropic Message Batches, OpenAI Batch, Gemini batch mode): the
    # seconds a batch is processed before it ends, the shares of its requests that end errored
    # and expired, and the seed of those draws and of the results' order (a run repeats itself).
    batch_delay_s: float = 0.0
    batch_errored: float = 0.0
    batch_expired: float = 0.0
    # Bytes an Anthropic batch's body may hold (None: the API's 256 MB); a larger one is
    # refused with its 413 `request_too_large`, to test that a collector sends it in halves.
    batch_max_bytes: int | None = None
    # The share of flex requests (OpenAI and Gemini `service_tier: "flex"`) refused as each
    # vendor refuses one it has no capacity for, spread evenly over the requests.
    flex_unavailable: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65_535:
            raise ValueError(f"port must be between 0 and 65535, got {self.port}")
        if not self.api_key:
            raise ValueError("api_key must not be empty")
        if self.ttft_ms < 0:
            raise ValueError(f"ttft_ms must be 0 or more, got {self.ttft_ms}")
        if self.tps < 0:
            raise ValueError(f"tps must be 0 (unlimited) or more, got {self.tps}")
        for name, value in (("rpm", self.rpm), ("tpm", self.tpm)):
            if value is not None and value < 1:
                raise ValueError(f"{name} must be 1 or more, got {value}")
        if self.context_window is not None and self.context_window < 1:
            raise ValueError(f"context_window must be 1 or more, got {self.context_window}")
        if not 0 <= self.tokens <= MAX_TOKENS:
            raise ValueError(f"tokens must be between 0 and {MAX_TOKENS}, got {self.tokens}")
        if not self.prefill_tps >= 0:
            raise ValueError(f"prefill_tps must be 0 or more, got {self.prefill_tps}")
        if not self.cache_ttl_scale > 0:
            raise ValueError(f"cache_ttl_scale must be more than 0, got {self.cache_ttl_scale}")
        unknown = sorted(set(self.refuse) - set(CACHE_FEATURES))
        if unknown:
            raise ValueError(
                f"refuse takes {', '.join(CACHE_FEATURES)}; unknown: {', '.join(unknown)}"
            )
        if self.batch_max_bytes is not None and self.batch_max_bytes < 1:
            raise ValueError(f"batch_max_bytes must be 1 or more, got {self.batch_max_bytes}")
        if not self.batch_delay_s >= 0:
            raise ValueError(f"batch_delay_s must be 0 or more, got {self.batch_delay_s}")
        for name, share in (
            ("batch_errored", self.batch_errored),
            ("batch_expired", self.batch_expired),
            ("flex_unavailable", self.flex_unavailable),
        ):
            if not 0 <= share <= 1:
                raise ValueError(f"{name} must be between 0 and 1, got {share}")
        if self.batch_errored + self.batch_expired > 1:
            raise ValueError("batch_errored and batch_expired must add up to 1 or less")
        if self.events_per_write < 1:
            raise ValueError(f"events_per_write must be 1 or more, got {self.events_per_write}")
