"""The catalog's data file (providers/models.json) read once and checked into `ModelInfo`
records; every figure names its source page, a malformed file fails with the key at fault.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import date
from importlib import resources
from typing import TypeVar, get_args

from grove.providers.base import ProviderName
from grove.providers.errors import CatalogError
from grove.providers.model_records import (
    THINKING_VALUES,
    Catalog,
    LongContext,
    ModelInfo,
    PriceChange,
    Rates,
    Status,
    StructuredOutput,
    ThinkingStyle,
)

DATA_FILE = "models.json"

T = TypeVar("T")
RATE_KEYS = frozenset({"input", "output", "cache_read", "cache_write_5m", "cache_write_1h"})
LONG_CONTEXT_KEYS = RATE_KEYS | {"above_input_tokens"}
CHANGE_KEYS = RATE_KEYS | {"from", "long_context"}
PRICE_KEYS = RATE_KEYS | {"long_context", "batch_discount", "changes"}
THINKING_KEYS = frozenset({"style", "accepts", "refuses", "default", "efforts", "preserved"})
MODEL_KEYS = frozenset(
    {
        "id",
        "provider",
        "status",
        "released",
        "deprecated",
        "retires",
        "successor",
        "context_window",
        "max_input_tokens",
        "max_output_tokens",
        "prices",
        "cache_min_tokens",
        "thinking",
        "structured_output",
        "forced_tool_choice",
        "sampling_parameters",
        "assistant_prefill",
        "explicit_cache",
        "sources",
        "notes",
    }
)
PROVIDERS: tuple[ProviderName, ...] = get_args(ProviderName)


class _Reader:
    """Typed access to one JSON object, each failure naming its key path."""

    def __init__(self, value: object, where: str, known: frozenset[str] | None = None) -> None:
        """`known`: the keys the object may have (a misspelt optional key is no silent None)."""
        if not isinstance(value, dict):
            raise CatalogError(f"{where} must be an object, got {_shown(value)}")
        self.value: dict[str, object] = value
        self.where = where
        unknown = [key for key in value if known is not None and key not in known]
        if unknown and known is not None:
            raise CatalogError(
                f"{where} has no key {unknown[0]!r} (it takes {', '.join(sorted(known))})"
            )

    def fail(self, key: str, what: str) -> CatalogError:
        return CatalogError(f"{self.where}.{key} {what}, got {_shown(self.value.get(key))}")

    def get(self, key: str, kind: type[T], what: str) -> T:
        value = self.value.get(key)
        if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
            raise self.fail(key, f"must be {what}")
        return value

    def has(self, key: str) -> bool:
        return self.value.get(key) is not None

    def text(self, key: str) -> str:
        value = self.get(key, str, "a non-empty string")
        if not value:
            raise self.fail(key, "must be a non-empty string")
        return value

    def choice(self, key: str, options: tuple[T, ...]) -> T:
        """One of `options` (a Literal's values), as that type."""
        value = self.text(key)
        for option in options:
            if value == option:
                return option
        raise self.fail(key, f"must be one of {', '.join(map(str, options))}")

    def flag(self, key: str) -> bool:
        return self.get(key, bool, "true or false")

    def tokens(self, key: str) -> int:
        value = self.get(key, int, "a whole number of tokens")
        if value < 1:
            raise self.fail(key, "must be a whole number of tokens, 1 or more")
        return value

    def price(self, key: str) -> float:
        value = self.value.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1e4:
            raise self.fail(key, "must be a price in USD per million tokens (0 to 10,000)")
        return float(value)

    def day(self, key: str, *, required: bool = False) -> date | None:
        what = "a date (YYYY-MM-DD)" if required else "a date (YYYY-MM-DD) or null"
        if not required and not self.has(key):
            return None
        text = self.get(key, str, what)
        try:
            return date.fromisoformat(text)
        except ValueError:
            raise self.fail(key, f"must be {what}") from None

    def words(self, key: str, allowed: frozenset[str] | None = None) -> tuple[str, ...]:
        values = self.get(key, list, "a list of strings")
        for value in values:
            if not isinstance(value, str) or (allowed is not None and value not in allowed):
                kind = (
                    "strings" if allowed is None else f"values among {', '.join(sorted(allowed))}"
                )
                raise self.fail(key, f"must be a list of {kind}")
        return tuple(values)

    def inner(self, key: str, known: frozenset[str] | None = None) -> _Reader:
        return _Reader(self.value.get(key), f"{self.where}.{key}", known)


def _shown(value: object) -> str:
    text = (
        json.dumps(value) if value is None or isinstance(value, bool | int | float) else repr(value)
    )
    return text if len(text) <= 60 else text[:57] + "..."


def _rates(prices: _Reader) -> Rates:
    return Rates(
        prices.price("input"),
        prices.price("output"),
        prices.price("cache_read"),
        prices.price("cache_write_5m"),
        prices.price("cache_write_1h"),
    )


def _long_context(prices: _Reader) -> LongContext | None:
    if not prices.has("long_context"):
        return None
    tier = prices.inner("long_context", LONG_CONTEXT_KEYS)
    return LongContext(tier.tokens("above_input_tokens"), _rates(tier))


def _timeline(prices: _Reader) -> tuple[PriceChange, ...]:
    """The model's prices from its release on (`date.min`), then each dated change, each
    change keeping the long-context tier it does not restate."""
    long_context = _long_context(prices)
    timeline = [PriceChange(date.min, _rates(prices), long_context)]
    for index, item in enumerate(prices.get("changes", list, "a list of dated prices")):
        change = _Reader(item, f"{prices.where}.changes[{index}]", CHANGE_KEYS)
        starts = change.day("from", required=True)
        assert starts is not None
        if starts <= timeline[-1].starts:
            raise change.fail("from", "must come after the previous price's date")
        timeline.append(PriceChange(starts, _rates(change), _long_context(change) or long_context))
    return tuple(timeline)


def _model(entry: _Reader, sources: Mapping[str, str], as_of: date) -> ModelInfo:
    model_id = entry.text("id")
    entry.where = f"{entry.where} ({model_id})"
    window, max_input = entry.tokens("context_window"), entry.tokens("max_input_tokens")
    if max_input > window:
        raise entry.fail("max_input_tokens", f"must be at most the context window ({window:,})")
    prices = entry.inner("prices", PRICE_KEYS)
    discount = prices.price("batch_discount")
    if discount >= 1:
        raise prices.fail("batch_discount", "must be a share below 1")
    timeline = _timeline(prices)
    in_force = [change for change in timeline if change.starts <= as_of][-1]
    thinking = entry.inner("thinking", THINKING_KEYS)
    accepts = thinking.words("accepts", THINKING_VALUES)
    refuses = thinking.words("refuses", THINKING_VALUES)
    if set(accepts) & set(refuses):
        raise thinking.fail("refuses", "must share no value with accepts")
    named = entry.words("sources")
    if not named:
        raise entry.fail("sources", "must name at least one source page")
    unknown = [key for key in named if key not in sources]
    if unknown:
        raise entry.fail(
            "sources", f"must name keys of the top-level sources ({unknown[0]!r} is not one)"
        )
    return ModelInfo(
        id=model_id,
        provider=entry.choice("provider", PROVIDERS),
        status=entry.choice("status", get_args(Status)),
        released=entry.day("released"),
        deprecated_on=entry.day("deprecated"),
        retires_on=entry.day("retires"),
        successor=entry.text("successor") if entry.has("successor") else None,
        context_window=window,
        max_input_tokens=max_input,
        max_output_tokens=entry.tokens("max_output_tokens"),
        price_input=in_force.rates.input,
        price_output=in_force.rates.output,
        price_cache_read=in_force.rates.cache_read,
        price_cache_write=in_force.rates.cache_write_5m,
        price_cache_write_1h=in_force.rates.cache_write_1h,
        long_context=in_force.long_context,
        price_changes=timeline,
        batch_discount=discount,
        cache_min_tokens=entry.tokens("cache_min_tokens"),
        thinking_style=thinking.choice("style", get_args(ThinkingStyle)),
        can_disable_thinking=bool({"disabled", "none", "minimal", "off"} & set(accepts)),
        thinking_accepts=accepts,
        thinking_refuses=refuses,
        thinking_default=thinking.text("default") if thinking.has("default") else None,
        effort_levels=thinking.words("efforts", THINKING_VALUES),
        preserved_thinking=thinking.flag("preserved"),
        structured_output=entry.choice("structured_output", get_args(StructuredOutput)),
        forced_tool_choice=entry.flag("forced_tool_choice"),
        sampling_parameters=entry.flag("sampling_parameters"),
        assistant_prefill=entry.flag("assistant_prefill"),
        explicit_cache=entry.flag("explicit_cache"),
        sources=tuple(sources[key] for key in named),
        notes=entry.text("notes") if entry.has("notes") else "",
    )


def parse_catalog(data: object, where: str = DATA_FILE) -> Catalog:
    """The catalog in `data` (the data file's JSON), checked; CatalogError names what is
    wrong and where."""
    top = _Reader(data, where, frozenset({"as_of", "sources", "families", "models"}))
    as_of = top.day("as_of", required=True)
    assert as_of is not None
    listing = top.inner("sources")
    sources = {key: listing.text(key) for key in listing.value}
    for key, url in sources.items():
        if not url.startswith("https://"):
            raise listing.fail(key, "must be an https:// address")
    entries = top.get("models", list, "a list of models")
    models = tuple(
        _model(_Reader(entry, f"{where}: models[{index}]", MODEL_KEYS), sources, as_of)
        for index, entry in enumerate(entries)
    )
    known = {info.id: info for info in models}
    if len(known) != len(models):
        twice = next(info.id for info in models if sum(m.id == info.id for m in models) > 1)
        raise top.fail("models", f"must name each id once ({twice!r} comes twice)")
    for info in models:
        _check_lifecycle(info, known, where)
    families = top.inner("families", frozenset(PROVIDERS))
    defaults: dict[ProviderName, str] = {}
    listed: dict[ProviderName, tuple[str, ...]] = {}
    for provider in PROVIDERS:
        family = families.inner(provider, frozenset({"default", "listed"}))
        defaults[provider] = family.text("default")
        listed[provider] = family.words("listed")
        if not _current(known.get(defaults[provider]), provider):
            raise family.fail("default", f"must name a current {provider} model of the file")
        for model_id in listed[provider]:
            if not _current(known.get(model_id), provider):
                raise family.fail(
                    "listed",
                    f"must name current {provider} models of the file ({model_id!r} is not one)",
                )
    return Catalog(as_of, sources, defaults, listed, models)


def _current(info: ModelInfo | None, provider: ProviderName) -> bool:
    return info is not None and info.provider == provider and info.status == "current"


def _check_lifecycle(info: ModelInfo, known: Mapping[str, ModelInfo], where: str) -> None:
    """A retired or deprecated model has its end date, and a successor is a current model of
    its provider."""
    place = f"{where}: model {info.id}"
    if info.status in ("retired", "deprecated") and info.retires_on is None:
        raise CatalogError(f"{place} is {info.status} and must give its retirement date (retires)")
    if info.successor is None:
        return
    if not _current(known.get(info.successor), info.provider):
        raise CatalogError(
            f"{place}: successor {info.successor!r} must be a current {info.provider} model "
            "of the file"
        )


def load_catalog() -> Catalog:
    """The data file shipped beside this module, read once per process."""
    text = resources.files("grove.providers").joinpath(DATA_FILE).read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CatalogError(f"{DATA_FILE} is not JSON: {exc}") from None
    return parse_catalog(data)
