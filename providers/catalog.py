"""The model catalog: known models, provider inference, `MODEL[/THINKING]` parsing, prices.

Any id with a known prefix is accepted; unknown ids borrow their family's figures. The
user-facing error texts are the reference's (spec/commands-model-fork.md), word for word.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timedelta
from functools import lru_cache

from grove.providers.base import THINKING_LEVELS, ProviderName, ThinkingLevel, Usage
from grove.providers.catalog_data import (
    LongContext,
    ModelInfo,
    PriceChange,
    Rates,
    StructuredOutput,
    ThinkingStyle,
    load_catalog,
)
from grove.providers.errors import InvalidThinkingLevelError, UnknownModelError

__all__ = [
    "LongContext",
    "ModelInfo",
    "PriceChange",
    "Rates",
    "StructuredOutput",
    "ThinkingStyle",
]

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
# A price the configuration sets for an Anthropic model writes hour-long cache entries at
# twice its input price (the catalog's own models carry their 1-hour write price).
ANTHROPIC_1H_WRITE_FACTOR = 2.0

# The vendors' models, read once when Grove starts: providers/models.json, each figure with
# its source page (providers/catalog_data.py checks the file).
CATALOG = load_catalog()
_MODELS: tuple[ModelInfo, ...] = CATALOG.models
MODELS: dict[str, ModelInfo] = {info.id: info for info in _MODELS}

# Each provider's default: a current model, neither deprecated nor retiring within a year.
DEFAULT_MODELS: dict[ProviderName, str] = dict(CATALOG.defaults)
# The three models per provider that the "Unknown model" text lists, in its order.
SUPPORTED_MODELS: dict[ProviderName, tuple[str, ...]] = dict(CATALOG.listed)


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
    """The known model an unknown id most resembles: the longest known id it extends
    (`gemini-2.5-flash-preview` is a flash, not a flash-lite), else the one sharing the most
    leading words (`claude-opus-6` is an Opus), else the provider's default. A Claude id of
    the old naming (`claude-3-7-sonnet-latest`) is one of the oldest generation known, whose
    thinking takes budgets."""
    candidates = [info for info in _MODELS if info.provider == provider]
    if _old_claude_naming(model):
        candidates = [info for info in candidates if info.thinking_style == "anthropic_budget"]
    return max(
        candidates,
        key=lambda info: (
            len(info.id) if model.startswith(f"{info.id}-") else 0,
            _shared_prefix(info.id.split("-"), model.split("-")),
            info.id == DEFAULT_MODELS[provider],
        ),
    )


def _old_claude_naming(model: str) -> bool:
    """`claude-3-7-sonnet-latest`: the version before the name, as before Claude 4."""
    words = model.split("-")
    return words[0] == "claude" and len(words) > 1 and words[1].isdigit()


def _shared_prefix(a: Sequence[str], b: Sequence[str]) -> int:
    length = 0
    for left, right in zip(a, b, strict=False):
        if left != right:
            break
        length += 1
    return length


def model_info(model: str, provider: ProviderName | None = None) -> ModelInfo:
    """Figures for any model id with a known prefix, or, for a compatible server's own model
    id, the figures of `provider`'s usual family; UnknownModelError otherwise. A dated
    snapshot of a catalog id is that model (its lifecycle too); another new id takes its
    family's figures and rules as a current model."""
    info = MODELS.get(model)
    if info is not None:
        return info
    provider = infer_provider(model) or provider
    if provider is None:
        raise UnknownModelError(unknown_model_text(model), model)
    return _borrowed(model, provider)


@lru_cache(maxsize=256)
def _borrowed(model: str, provider: ProviderName) -> ModelInfo:
    """An unknown id's figures, worked out once (each request of a fan-out asks again)."""
    family = _family(model, provider)
    if _is_snapshot(model, family.id):
        return replace(family, id=model, known=False)
    return replace(
        family,
        id=model,
        known=False,
        can_disable_thinking=family.can_disable_thinking and "pro" not in model,
        structured_output=_structured_output(model, family),
        status="current",
        released=None,
        deprecated_on=None,
        retires_on=None,
        successor=None,
    )


# A dated snapshot of an id is that model (its figures and lifecycle).
_SNAPSHOT = re.compile(r"-\d{8}|-\d{4}-\d{2}-\d{2}|-\d{3}")


def _is_snapshot(model: str, known: str) -> bool:
    """Whether `model` is `known` with a date or version suffix (`claude-sonnet-4-5-20250929`,
    `gpt-5-2025-08-07`, `gemini-2.0-flash-001`)."""
    return model.startswith(known) and _SNAPSHOT.fullmatch(model[len(known) :]) is not None


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
    """A dated snapshot of a known model takes schemas as the model does; a Claude id of the
    old naming (`claude-3-7-sonnet-latest`: models before 4.5 lack structured outputs) goes
    through the forced tool, which those take; another new id as its family does."""
    if _old_claude_naming(model):
        return "tool"
    return family.structured_output


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
    # Named `PROVIDER:MODEL` (directly or by an alias): sent as written, never judged by the
    # catalog (a typo's hint, a retired id's refusal).
    as_written: bool = field(default=False, compare=False)

    def __str__(self) -> str:
        """What parses back to this spec: a model named with its provider, or one the
        catalog does not place on this provider, keeps its `PROVIDER:` prefix."""
        bare = not self.as_written and infer_provider(self.model) == self.provider
        named = self.model if bare else self.qualified
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
        return ModelSpec(provider=named, model=model_id, thinking=thinking, as_written=True)
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
    suggestion = None if ":" in written else _current_spelling(near_miss(spec.model))
    if suggestion is not None:
        raise UnknownModelError(near_miss_text(spec.model, spec.provider, suggestion), spec.model)
    return spec


def _current_spelling(suggestion: str | None) -> str | None:
    """A near miss to suggest: a retired model's successor in its place (`claude-sonet-4-5`
    was meant as the retired claude-sonnet-4-5: suggest claude-sonnet-5-5)."""
    info = MODELS.get(suggestion or "")
    if info is not None and info.status == "retired" and info.successor is not None:
        return info.successor
    return suggestion


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


def cost_usd(model: str, usage: Usage, day: date | None = None) -> float:
    """The price of one request made on `day` (today by default): prompt tokens read from a
    cache and written to one at their prices, the rest at the input price, all at the
    long-context rates when the prompt is longer than the model's tier starts, and at the
    prices in force that day. Thinking tokens are billed as output and already counted there."""
    rates = _rates(model, usage.input_tokens, day)
    if rates is None:
        return 0.0
    short_writes = max(usage.cache_write_tokens - usage.cache_write_1h_tokens, 0)
    total = (
        usage.uncached_input_tokens * rates.input
        + usage.output_tokens * rates.output
        + usage.cache_read_tokens * rates.cache_read
        + short_writes * rates.cache_write_5m
        + usage.cache_write_1h_tokens * rates.cache_write_1h
    )
    return round(total / 1_000_000, 8)


def reply_cost_usd(model: str, output_tokens: int, input_tokens: int) -> float:
    """What `output_tokens` of reply cost today on a request whose prompt holds
    `input_tokens`: past a model's long-context tier its output is dearer too (GPT-6: 1.5x)."""
    rates = _rates(model, input_tokens, None)
    return 0.0 if rates is None else round(output_tokens * rates.output / 1_000_000, 8)


def cache_saving_usd(model: str, usage: Usage, day: date | None = None) -> float:
    """What caching saved on one request: its price with every prompt token at the input
    price, less what it cost (below zero when it wrote more than it read)."""
    if not usage.cache_read_tokens and not usage.cache_write_tokens:
        return 0.0
    plain = Usage(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens)
    return round(cost_usd(model, plain, day) - cost_usd(model, usage, day), 8)


def _rates(model: str, input_tokens: int, day: date | None) -> Rates | None:
    """The rates of a request to `model` with `input_tokens` of prompt on `day`: the
    configuration's prices over the catalog's; None for a model Grove cannot price."""
    prices = _SET_PRICES.get(model)
    if prices is not None:
        long_write = prices[3]
        if infer_provider(model) == "anthropic":
            long_write = prices[0] * ANTHROPIC_1H_WRITE_FACTOR
        return Rates(prices[0], prices[1], prices[2], prices[3], long_write)
    try:
        info = model_info(model)
    except UnknownModelError:
        return None
    return info.rates_on(day or _today(), input_tokens)


# Today's date, and the time.time() at which it ends.
_today_until: tuple[date, float] = (date.min, 0.0)


def _today() -> date:
    """Today's date, read from the clock once a day rather than at every request (a cost is
    worked out for each reply of a fan-out, and date.today() is the dearest part of it)."""
    global _today_until
    today, until = _today_until
    if time.time() >= until:
        today = date.today()
        tomorrow = datetime.combine(today + timedelta(days=1), datetime.min.time())
        _today_until = (today, tomorrow.timestamp())
    return today
