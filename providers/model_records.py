"""What Grove knows of a model, as frozen records: its figures, prices and their changes, and
the whole catalog; how the data file becomes them is catalog_file.py's job.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from typing import Literal

from grove.providers.base import ProviderName

ThinkingStyle = Literal[
    "anthropic_budget",  # thinking.budget_tokens
    "anthropic_adaptive",  # thinking.type adaptive, output_config.effort (Claude 4.6 and later)
    "openai_effort",  # reasoning.effort; none -> "minimal"
    "openai_effort_none",  # reasoning.effort; accepts "none" (gpt-5.1 and later)
    "gemini_budget",  # thinkingConfig.thinkingBudget (2.5)
    "gemini_level",  # thinkingConfig.thinkingLevel (3.x and later)
]

# How a model takes an output schema: natively (the wire's own JSON-schema field), natively
# only when the request offers no tools (Gemini 2.5 refuses JSON answers with function
# calling), natively through Anthropic's `output_config.format` (Claude 5 and later, where a
# forced tool may be refused), or only through a forced final tool (providers/output.py).
StructuredOutput = Literal["native", "native_without_tools", "output_config", "tool"]
Status = Literal["current", "legacy", "deprecated", "retired"]

# The values a model's thinking settings may name: Anthropic `thinking.type` values, OpenAI
# `reasoning.effort` values, Gemini `thinkingLevel` values, or "budget" / "off" for Gemini
# 2.5's `thinkingBudget` (a budget, or 0 to stop thinking).
THINKING_VALUES = frozenset(
    {
        "adaptive",
        "enabled",
        "disabled",
        "between_tools",
        "none",
        "minimal",
        "low",
        "medium",
        "high",
        "xhigh",
        "max",
        "budget",
        "off",
    }
)


@dataclass(frozen=True, slots=True)
class Rates:
    """USD per million tokens: input, output, cache reads, cache writes kept 5 minutes and 1
    hour."""

    input: float
    output: float
    cache_read: float
    cache_write_5m: float
    cache_write_1h: float


@dataclass(frozen=True, slots=True)
class LongContext:
    """Rates for a whole request whose prompt is longer than `above_input_tokens`."""

    above_input_tokens: int
    rates: Rates


@dataclass(frozen=True, slots=True)
class PriceChange:
    """Rates in force from `starts` on (a release's prices, or a vendor's dated change)."""

    starts: date
    rates: Rates
    long_context: LongContext | None


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelInfo:
    """What Grove knows of a model. Prices are USD per million tokens, those in force on the
    data file's date (`rates_on` gives another day's)."""

    id: str
    provider: ProviderName
    context_window: int
    max_output_tokens: int
    thinking_style: ThinkingStyle
    price_input: float
    price_output: float
    price_cache_read: float
    price_cache_write: float  # a cache entry kept 5 minutes
    supports_tools: bool = True
    supports_images: bool = True  # image input (snapcompact frames need it)
    can_disable_thinking: bool = True
    structured_output: StructuredOutput = "native"
    known: bool = True
    # The shortest prompt prefix the provider caches for this model (its documentation's
    # minimum cacheable length), in tokens.
    cache_min_tokens: int = 1024
    status: Status = "current"
    released: date | None = None
    deprecated_on: date | None = None
    retires_on: date | None = None
    successor: str | None = None
    max_input_tokens: int = 0
    price_cache_write_1h: float = 0.0
    long_context: LongContext | None = None
    # The prices from release on (the first starts at date.min), then each dated change.
    price_changes: tuple[PriceChange, ...] = ()
    batch_discount: float = 0.0
    thinking_accepts: tuple[str, ...] = ()
    thinking_refuses: tuple[str, ...] = ()
    thinking_default: str | None = None
    effort_levels: tuple[str, ...] = ()
    preserved_thinking: bool = False
    forced_tool_choice: bool = True
    sampling_parameters: bool = True
    assistant_prefill: bool = True
    # Whether the provider's explicit cache (Gemini `cachedContents`) takes the model.
    explicit_cache: bool = False
    sources: tuple[str, ...] = ()  # the pages its figures come from
    notes: str = ""

    @property
    def prices(self) -> tuple[float, float, float, float]:
        """Input, output, cache-read and (5-minute) cache-write prices."""
        return (self.price_input, self.price_output, self.price_cache_read, self.price_cache_write)

    @property
    def rates(self) -> Rates:
        return Rates(
            self.price_input,
            self.price_output,
            self.price_cache_read,
            self.price_cache_write,
            self.price_cache_write_1h,
        )

    def input_share(self, share: float) -> int:
        """`share` of the longest prompt the model takes, in tokens (compaction's threshold is
        one): of its maximum input, not of its window, part of which only output may use."""
        return int(self.max_input_tokens * share)

    def rates_on(self, day: date, input_tokens: int = 0) -> Rates:
        """The rates of a request made on `day` whose prompt holds `input_tokens`: the prices
        in force that day, and their long-context tier when the prompt is longer than it."""
        in_force: PriceChange | None = None
        for change in self.price_changes:
            if change.starts > day:
                break
            in_force = change
        if in_force is None:
            rates, long_context = self.rates, self.long_context
        else:
            rates, long_context = in_force.rates, in_force.long_context
        if long_context is not None and input_tokens > long_context.above_input_tokens:
            return long_context.rates
        return rates


@dataclass(frozen=True, slots=True)
class Catalog:
    """The data file read: its date, source pages, each provider's default and listed models,
    and the models in the file's order."""

    as_of: date
    sources: Mapping[str, str]
    defaults: Mapping[ProviderName, str]
    listed: Mapping[ProviderName, tuple[str, ...]]
    models: tuple[ModelInfo, ...]
