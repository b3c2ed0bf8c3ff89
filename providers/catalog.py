"""The model catalog: known models, provider inference, `MODEL[/THINKING]` parsing, prices.

Any id with a known prefix is accepted; unknown ids borrow their family's figures. The
user-facing error texts are the reference's (spec/commands-model-fork.md), word for word.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Literal

from providers.base import THINKING_LEVELS, ProviderName, ThinkingLevel, Usage
from providers.errors import InvalidThinkingLevelError, UnknownModelError

ThinkingStyle = Literal[
    "anthropic_budget",  # thinking.budget_tokens
    "anthropic_adaptive",  # thinking.type adaptive, output_config.effort (Claude 5 and later)
    "openai_effort",  # reasoning.effort; none -> "minimal"
    "openai_effort_none",  # reasoning.effort; accepts "none" (gpt-5.1 and later)
    "gemini_budget",  # thinkingConfig.thinkingBudget (2.5)
    "gemini_level",  # thinkingConfig.thinkingLevel (3.x)
]

# How a model takes an output schema: natively (the wire's own JSON-schema field), natively
# only when the request offers no tools (Gemini 2.5 refuses JSON answers with function
# calling), or only through a forced final tool (providers/output.py).
StructuredOutput = Literal["native", "native_without_tools", "tool"]

PROVIDER_PREFIXES: tuple[tuple[str, ProviderName], ...] = (
    ("claude-", "anthropic"),
    ("gpt-", "openai"),
    ("gemini-", "google"),
)
PROVIDER_TITLES: dict[ProviderName, str] = {
    "anthropic": "Anthropic",
    "openai": "OpenAI",
    "google": "Google",
}


# USD per million input, output, cache-read and cache-write tokens.
Prices = tuple[float, float, float, float]
# An Anthropic cache entry kept for an hour is written at twice the input price (five
# minutes: the catalog's cache-write price, 1.25 times the input price).
ANTHROPIC_1H_WRITE_FACTOR = 2.0


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelInfo:
    """What Grove knows of a model. Prices are USD per million tokens."""

    id: str
    provider: ProviderName
    context_window: int
    max_output_tokens: int
    thinking_style: ThinkingStyle
    price_input: float
    price_output: float
    price_cache_read: float
    price_cache_write: float
    supports_tools: bool = True
    supports_images: bool = True  # image input (snapcompact frames need it)
    can_disable_thinking: bool = True
    structured_output: StructuredOutput = "native"
    known: bool = True
    # The shortest prompt prefix the provider caches for this model (its documentation's
    # minimum cacheable length), in tokens.
    cache_min_tokens: int = 1024

    @property
    def prices(self) -> Prices:
        return (self.price_input, self.price_output, self.price_cache_read, self.price_cache_write)


def _model(
    model_id: str,
    provider: ProviderName,
    context: int,
    output: int,
    style: ThinkingStyle,
    prices: tuple[float, float, float, float],
    *,
    can_disable_thinking: bool = True,
    cache_min_tokens: int = 1024,
    structured_output: StructuredOutput = "native",
) -> ModelInfo:
    return ModelInfo(
        id=model_id,
        provider=provider,
        context_window=context,
        max_output_tokens=output,
        thinking_style=style,
        price_input=prices[0],
        price_output=prices[1],
        price_cache_read=prices[2],
        price_cache_write=prices[3],
        can_disable_thinking=can_disable_thinking,
        cache_min_tokens=cache_min_tokens,
        structured_output=structured_output,
    )


# Cache-write prices: Anthropic's five-minute entries at 1.25 times the input price; OpenAI
# (from GPT-6 on) the same; earlier OpenAI models and Gemini charge no more than the input
# price for what their caches take in.
# The vendors' current models, from their model pages (November 2026): Claude 5.5 (1M window,
# 128K output, adaptive thinking; Opus 5.5 thinks always, Haiku 5.5's prices are those of
# prompts up to 100K tokens), GPT-6 Sol and Luna and GPT-6.1 Terra (1.05M window, 128K output,
# effort none to max; the prices of prompts up to 272K tokens), Gemini 3.8 Flash (1M window,
# 64K output, thinking levels low to high; its price until 2026-12-31, then $1.50 / $7.50).
_CURRENT_MODELS: tuple[ModelInfo, ...] = (
    _model(
        "claude-haiku-5-5",
        "anthropic",
        1_000_000,
        128_000,
        "anthropic_adaptive",
        (0.10, 0.50, 0.01, 0.125),
        cache_min_tokens=4096,
    ),
    _model(
        "claude-sonnet-5-5",
        "anthropic",
        1_000_000,
        128_000,
        "anthropic_adaptive",
        (2.0, 10.0, 0.10, 2.50),
    ),
    _model(
        "claude-opus-5-5",
        "anthropic",
        1_000_000,
        128_000,
        "anthropic_adaptive",
        (4.0, 20.0, 0.40, 5.0),
        can_disable_thinking=False,
        cache_min_tokens=4096,
    ),
    _model(
        "gpt-6-luna", "openai", 1_050_000, 128_000, "openai_effort_none", (0.10, 0.50, 0.01, 0.125)
    ),
    _model(
        "gpt-6.1-terra", "openai", 1_050_000, 128_000, "openai_effort_none", (1.0, 5.0, 0.05, 1.25)
    ),
    _model("gpt-6-sol", "openai", 1_050_000, 128_000, "openai_effort_none", (2.0, 10.0, 0.20, 2.5)),
    _model(
        "gemini-3.8-flash",
        "google",
        1_048_576,
        65_536,
        "gemini_level",
        (0.75, 3.75, 0.075, 0.75),
        can_disable_thinking=False,
        cache_min_tokens=4096,
    ),
)
_MODELS: tuple[ModelInfo, ...] = (
    *_CURRENT_MODELS,
    _model(
        "claude-haiku-4-5",
        "anthropic",
        200_000,
        64_000,
        "anthropic_budget",
        (1.0, 5.0, 0.10, 1.25),
        cache_min_tokens=4096,
    ),
    _model(
        "claude-sonnet-4-5",
        "anthropic",
        200_000,
        64_000,
        "anthropic_budget",
        (3.0, 15.0, 0.30, 3.75),
    ),
    _model(
        "claude-opus-4-5",
        "anthropic",
        200_000,
        64_000,
        "anthropic_budget",
        (5.0, 25.0, 0.50, 6.25),
        cache_min_tokens=4096,
    ),
    _model("gpt-5-nano", "openai", 400_000, 128_000, "openai_effort", (0.05, 0.40, 0.005, 0.05)),
    _model("gpt-5-mini", "openai", 400_000, 128_000, "openai_effort", (0.25, 2.0, 0.025, 0.25)),
    _model("gpt-5", "openai", 400_000, 128_000, "openai_effort", (1.25, 10.0, 0.125, 1.25)),
    _model("gpt-5.1", "openai", 400_000, 128_000, "openai_effort_none", (1.25, 10.0, 0.125, 1.25)),
    _model(
        "gemini-2.5-flash-lite",
        "google",
        1_048_576,
        65_536,
        "gemini_budget",
        (0.10, 0.40, 0.025, 0.10),
        structured_output="native_without_tools",
    ),
    _model(
        "gemini-2.5-flash",
        "google",
        1_048_576,
        65_536,
        "gemini_budget",
        (0.30, 2.50, 0.075, 0.30),
        structured_output="native_without_tools",
    ),
    _model(
        "gemini-2.5-pro",
        "google",
        1_048_576,
        65_536,
        "gemini_budget",
        (1.25, 10.0, 0.31, 1.25),
        can_disable_thinking=False,
        structured_output="native_without_tools",
        cache_min_tokens=4096,
    ),
    _model("gemini-3.0-flash", "google", 1_048_576, 65_536, "gemini_level", (0.50, 3.0, 0.05, 0.5)),
    _model(
        "gemini-3.0-pro",
        "google",
        1_048_576,
        65_536,
        "gemini_level",
        (2.0, 12.0, 0.20, 2.0),
        can_disable_thinking=False,
        cache_min_tokens=4096,
    ),
)
MODELS: dict[str, ModelInfo] = {info.id: info for info in _MODELS}

DEFAULT_MODELS: dict[ProviderName, str] = {
    "anthropic": "claude-sonnet-4-5",
    "openai": "gpt-5-mini",
    "google": "gemini-3.0-flash",
}
# The three models per provider that the "Unknown model" text lists, in its order.
SUPPORTED_MODELS: dict[ProviderName, tuple[str, ...]] = {
    "anthropic": ("claude-haiku-4-5", "claude-sonnet-4-5", "claude-opus-4-5"),
    "openai": ("gpt-5-nano", "gpt-5-mini", "gpt-5"),
    "google": ("gemini-2.5-flash-lite", "gemini-3.0-flash", "gemini-3.0-pro"),
}


def completions() -> list[str]:
    """The Tab-completion list of the reference: each model, and `/THINKING` for defaults."""
    items: list[str] = []
    for provider, models in SUPPORTED_MODELS.items():
        for model in models:
            items.append(model)
            if model == DEFAULT_MODELS[provider]:
                items.extend(f"{model}/{level}" for level in THINKING_LEVELS)
    return items


def infer_provider(model: str) -> ProviderName | None:
    for prefix, provider in PROVIDER_PREFIXES:
        if model.startswith(prefix):
            return provider
    return None


def _family(model: str, provider: ProviderName) -> ModelInfo:
    """The known model an unknown id most resembles: the longest known id it starts with
    (`gemini-2.5-flash-preview` is a flash, not a flash-lite), else the longest shared prefix."""
    candidates = [info for info in _MODELS if info.provider == provider]
    best = max(
        candidates,
        key=lambda info: (
            len(info.id) if model.startswith(info.id) else 0,
            _shared_prefix(info.id, model),
            info.id == DEFAULT_MODELS[provider],
        ),
    )
    return best


def _shared_prefix(a: str, b: str) -> int:
    length = 0
    for left, right in zip(a, b, strict=False):
        if left != right:
            break
        length += 1
    return length


def model_info(model: str, provider: ProviderName | None = None) -> ModelInfo:
    """Figures for any model id with a known prefix, or, for a compatible server's own model
    id, the figures of `provider`'s usual family; UnknownModelError otherwise."""
    info = MODELS.get(model)
    if info is not None:
        return info
    provider = infer_provider(model) or provider
    if provider is None:
        raise UnknownModelError(unknown_model_text(model), model)
    family = _family(model, provider)
    style = family.thinking_style
    if provider == "openai" and _openai_accepts_none(model):
        style = "openai_effort_none"
    return ModelInfo(
        id=model,
        provider=provider,
        context_window=family.context_window,
        max_output_tokens=family.max_output_tokens,
        thinking_style=style,
        price_input=family.price_input,
        price_output=family.price_output,
        price_cache_read=family.price_cache_read,
        price_cache_write=family.price_cache_write,
        supports_tools=family.supports_tools,
        can_disable_thinking=family.can_disable_thinking and "pro" not in model,
        structured_output=_structured_output(model, family),
        known=False,
        cache_min_tokens=family.cache_min_tokens,
    )


# The vendors' deprecation lists (Anthropic's is the one its SDK carries): a model's end-of-life
# date and the current model that replaces it. A dated snapshot of the id is retired with it.
RETIREMENTS: dict[str, tuple[date, str]] = {
    "claude-sonnet-4-5": (date(2026, 11, 30), "claude-sonnet-5-5"),
    "claude-opus-4-5": (date(2027, 1, 22), "claude-opus-5-5"),
}
_SNAPSHOT = re.compile(r"-\d{8}|-\d{4}-\d{2}-\d{2}")


def retirement_warning(model: str, today: date | None = None) -> str | None:
    """The one-line warning for a model its vendor has deprecated, with its end-of-life date
    and its replacement; None for a model not on a deprecation list."""
    for retired, (end, successor) in RETIREMENTS.items():
        if model == retired or (
            model.startswith(retired) and _SNAPSHOT.fullmatch(model[len(retired) :])
        ):
            provider = infer_provider(retired)
            assert provider is not None
            reaches = "reached" if end < (today or date.today()) else "reaches"
            return (
                f"Warning: {model} {reaches} its end of life on {end.isoformat()} "
                f"({PROVIDER_TITLES[provider]}'s deprecation list); use {successor}"
            )
    return None


_WORD = re.compile(r"[a-z]{3,}")
# Past this an id is no typo of a catalog id (the longest is a third of it): no hint is sought,
# whose cost grows with the id's words (a `/model` line may be a megabyte).
MAX_NEAR_MISS_CHARS = 100


def near_miss(model: str) -> str | None:
    """The catalog's spelling of an id whose words are a typo away from the words of its
    provider's known ids (`claude-sonet-4-5` -> `claude-sonnet-4-5`); None when the id is
    known, or its words are known or far from any (a new model, a new version number)."""
    provider = infer_provider(model)
    if provider is None or model in MODELS or len(model) > MAX_NEAR_MISS_CHARS:
        return None
    ids = [info.id for info in _MODELS if info.provider == provider]
    known = {word for known_id in ids for word in _WORD.findall(known_id)}
    corrected, changed = model, False
    for match in reversed(list(_WORD.finditer(model))):
        word = match.group()
        if word in known:
            continue
        closest = min(sorted(known), key=lambda candidate: _edits(word, candidate))
        if _edits(word, closest) <= (1 if len(closest) <= 4 else 2):
            corrected = corrected[: match.start()] + closest + corrected[match.end() :]
            changed = True
    return corrected if changed else None


def _edits(a: str, b: str) -> int:
    """Insertions, deletions, substitutions and swaps of neighbours that turn `a` into `b`."""
    rows = [list(range(len(b) + 1))]
    for i, left in enumerate(a, 1):
        row = [i]
        for j, right in enumerate(b, 1):
            cost = min(rows[-1][j] + 1, row[j - 1] + 1, rows[-1][j - 1] + (left != right))
            if i > 1 and j > 1 and left == b[j - 2] and a[i - 2] == right:
                cost = min(cost, rows[-2][j - 2] + 1)
            row.append(cost)
        rows.append(row)
    return rows[-1][-1]


def near_miss_text(model: str, provider: ProviderName, suggestion: str) -> str:
    return (
        f"Unknown model: {model}. Did you mean {suggestion}? "
        f"(To send {model} as written, name it {provider}:{model}.)"
    )


def _structured_output(model: str, family: ModelInfo) -> StructuredOutput:
    """A dated snapshot of a known model takes schemas as the model does; another Claude id
    (models before 4.5 lack structured outputs) goes through the forced tool, which every
    Claude model with tools takes."""
    if family.provider == "anthropic" and not model.startswith(family.id):
        return "tool"
    return family.structured_output


def _openai_accepts_none(model: str) -> bool:
    """gpt-5.1 and later accept reasoning effort "none"; gpt-5, -mini, -nano do not."""
    rest = model.removeprefix("gpt-")
    head = rest.split("-", 1)[0]
    try:
        return float(head) > 5.0
    except ValueError:
        return False


def unknown_model_text(model: str) -> str:
    width = max(len(title) for title in PROVIDER_TITLES.values()) + 1
    lines = [f"Unknown model: {model}", "", "Supported models:"]
    for provider, models in SUPPORTED_MODELS.items():
        label = f"{PROVIDER_TITLES[provider]}:".ljust(width)
        lines.append(f"  {label} {', '.join(models)}")
    return "\n".join(lines)


def invalid_thinking_text(level: str) -> str:
    return f"Invalid thinking level: {level}\nValid levels: {', '.join(THINKING_LEVELS)}"


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelSpec:
    """A parsed `MODEL[/THINKING]`; `thinking=None` means the provider's default."""

    provider: ProviderName
    model: str
    thinking: ThinkingLevel | None = None

    def __str__(self) -> str:
        """What parses back to this spec: a model the catalog does not place on this
        provider keeps its `PROVIDER:` prefix."""
        named = self.model if infer_provider(self.model) == self.provider else self.qualified
        return named if self.thinking is None else f"{named}/{self.thinking}"

    @property
    def qualified(self) -> str:
        return f"{self.provider}:{self.model}"


def parse_model_spec(text: str, aliases: Mapping[str, str] | None = None) -> ModelSpec:
    """Parse `MODEL[/THINKING]` as the reference says; aliases map a name to such a string.
    `PROVIDER:MODEL_ID` (given or as an alias's target) names a model the catalog does not
    know: a compatible server's own model on that provider's wire.

    Raises only UnknownModelError or InvalidThinkingLevelError, with the reference's texts.
    """
    model, slash, level = text.strip().partition("/")
    thinking: ThinkingLevel | None = None
    if slash:
        thinking = _thinking_level(level)
    if aliases and model in aliases:
        target, _, alias_level = aliases[model].strip().partition("/")
        if thinking is None and alias_level:
            thinking = _thinking_level(alias_level)
        model = target
    named, colon, model_id = model.partition(":")
    if colon and named in PROVIDER_TITLES and model_id:
        # "openai:my-local-model": a compatible server's model id on a provider's wire.
        return ModelSpec(provider=named, model=model_id, thinking=thinking)
    provider = infer_provider(model)
    if provider is None:
        raise UnknownModelError(unknown_model_text(model), model)
    return ModelSpec(provider=provider, model=model, thinking=thinking)


def parse_model_choice(text: str, aliases: Mapping[str, str] | None = None) -> ModelSpec:
    """A model a user picks now (a flag, /model, /fork --model): `parse_model_spec`, and an id
    a typo away from a catalog id refused with a "did you mean" (UnknownModelError); one
    named `PROVIDER:MODEL`, directly or by an alias, is taken as written."""
    spec = parse_model_spec(text, aliases)
    name = text.strip().partition("/")[0]
    written = (aliases or {}).get(name, name).strip().partition("/")[0]
    suggestion = None if ":" in written else near_miss(spec.model)
    if suggestion is not None:
        raise UnknownModelError(near_miss_text(spec.model, spec.provider, suggestion), spec.model)
    return spec


def _thinking_level(level: str) -> ThinkingLevel:
    for known in THINKING_LEVELS:
        if level == known:
            return known
    raise InvalidThinkingLevelError(invalid_thinking_text(level), level)


# Prices the configuration sets (`[models] prices`), by model id, over the catalog's: USD per
# million input, output, cache-read and cache-write tokens.
_SET_PRICES: dict[str, Prices] = {}


def checked_prices(prices: Mapping[str, Sequence[float]]) -> dict[str, Prices]:
    """`[models] prices` read: per model, input and output, and optionally cache read and
    cache write (which default to the input price), in USD per million tokens."""
    checked: dict[str, Prices] = {}
    for model, given in prices.items():
        values = [float(value) for value in given]
        if not 2 <= len(values) <= 4 or any(not math.isfinite(v) or v < 0 for v in values):
            raise ValueError(
                f"the price of {model} is 2 to 4 numbers of USD per million tokens (input, "
                f"output, cache read, cache write), got {list(given)!r}"
            )
        values += [values[0]] * (4 - len(values))
        checked[model] = (values[0], values[1], values[2], values[3])
    return checked


def set_prices(prices: Mapping[str, Sequence[float]]) -> None:
    """Price models the catalog does not know (or price known ones otherwise), in this
    process: each process that counts cost (supervisor, hosts) is given the same."""
    _SET_PRICES.clear()
    _SET_PRICES.update(checked_prices(prices))


def priced(model: str) -> bool:
    """Whether Grove knows what `model` costs (a cost budget needs that)."""
    if model in _SET_PRICES:
        return True
    try:
        model_info(model)
    except UnknownModelError:
        return False
    return True


def cost_usd(model: str, usage: Usage) -> float:
    """The price of one request: prompt tokens read from a cache and written to one at their
    prices, the rest at the input price. Thinking tokens are billed as output and already
    counted there."""
    found = _prices(model)
    if found is None:
        return 0.0
    prices, provider = found
    long_write = prices[0] * ANTHROPIC_1H_WRITE_FACTOR if provider == "anthropic" else prices[3]
    short_writes = max(usage.cache_write_tokens - usage.cache_write_1h_tokens, 0)
    total = (
        usage.uncached_input_tokens * prices[0]
        + usage.output_tokens * prices[1]
        + usage.cache_read_tokens * prices[2]
        + short_writes * prices[3]
        + usage.cache_write_1h_tokens * long_write
    )
    return round(total / 1_000_000, 8)


def cache_saving_usd(model: str, usage: Usage) -> float:
    """What caching saved on one request: its price with every prompt token at the input
    price, less what it cost (below zero when it wrote more than it read)."""
    if not usage.cache_read_tokens and not usage.cache_write_tokens:
        return 0.0
    plain = Usage(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens)
    return round(cost_usd(model, plain) - cost_usd(model, usage), 8)


def _prices(model: str) -> tuple[Prices, ProviderName | None] | None:
    """The prices of `model` (the configuration's over the catalog's) and its provider."""
    provider = infer_provider(model)
    prices = _SET_PRICES.get(model)
    if prices is not None:
        return prices, provider
    try:
        info = model_info(model)
    except UnknownModelError:
        return None
    return info.prices, info.provider
