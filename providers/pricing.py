"""What a request costs: the catalog's rates on the day, or the prices the configuration sets
(`[models] prices`); cost, a reply's cost and what caching saved, in USD.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from datetime import date, datetime, timedelta

from grove.providers.base import Tier, Usage
from grove.providers.catalog import infer_provider, model_info
from grove.providers.errors import UnknownModelError
from grove.providers.model_records import Rates

# USD per million input, output, cache-read and cache-write tokens.
Prices = tuple[float, float, float, float]
# A price the configuration sets for an Anthropic model writes hour-long cache entries at
# twice its input price (the catalog's own models carry their 1-hour write price).
ANTHROPIC_1H_WRITE_FACTOR = 2.0
# What each tier costs against the standard price: Anthropic's Message Batches, OpenAI's
# Batch API and flex tier, Gemini's batch mode and flex all take half (cached tokens too).
TIER_PRICE_FACTOR: dict[Tier, float] = {"standard": 1.0, "flex": 0.5, "batch": 0.5}

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


def cost_usd(model: str, usage: Usage, day: date | None = None, tier: Tier = "standard") -> float:
    """The price of one request made on `day` (today by default): prompt tokens read from a
    cache and written to one at their prices, the rest at the input price, all at the
    long-context rates when the prompt is longer than the model's tier starts, and at the
    prices in force that day. Thinking tokens are billed as output and already counted there.
    On the flex and batch tiers every token costs `TIER_PRICE_FACTOR` of that."""
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
    return round(total * TIER_PRICE_FACTOR[tier] / 1_000_000, 8)


def reply_cost_usd(
    model: str, output_tokens: int, input_tokens: int, tier: Tier = "standard"
) -> float:
    """What `output_tokens` of reply cost today on a request whose prompt holds
    `input_tokens`, on `tier`: past a model's long-context tier its output is dearer too
    (GPT-6: 1.5x)."""
    rates = _rates(model, input_tokens, None)
    if rates is None:
        return 0.0
    return round(output_tokens * rates.output * TIER_PRICE_FACTOR[tier] / 1_000_000, 8)


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
