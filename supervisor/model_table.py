"""The catalog as `grove models` shows it: one JSON-ready row per model with its standing on
a day (supervisor and service alike), and those rows as a table (the command line's).
"""

from __future__ import annotations

from dataclasses import asdict
from datetime import date
from typing import Any

from grove.providers.catalog import DEFAULT_MODELS, MODELS, PROVIDER_TITLES
from grove.providers.errors import GroveError
from grove.providers.lifecycle import standing_of, today

PRICE_COLUMNS = (("input", "input"), ("output", "output"), ("cache_read", "cache rd"))


def model_rows(
    include_retired: bool = False, provider: str | None = None, day: date | None = None
) -> list[dict[str, Any]]:
    """The catalog's models in its order (`provider`'s only, when given), retired ones only
    with `include_retired`: id, provider, default, status on `day` (today by default),
    retires (ISO date or None), successor, context window, maximum input and output, and the
    prices in force that day (USD per million tokens)."""
    if provider is not None and provider not in PROVIDER_TITLES:
        known = ", ".join(PROVIDER_TITLES)
        raise GroveError(f"Unknown provider: {provider} (one of {known})")
    when = day or today()
    rows = []
    for info in MODELS.values():
        if provider is not None and info.provider != provider:
            continue
        verdict = standing_of(info, when)
        if verdict.retired and not include_retired:
            continue
        rates = asdict(info.rates_on(when))
        tier = info.long_context
        rates["long_context"] = (
            None
            if tier is None
            else {
                "above_input_tokens": tier.above_input_tokens,
                **asdict(info.rates_on(when, tier.above_input_tokens + 1)),
            }
        )
        rates["batch_discount"] = info.batch_discount
        rows.append(
            {
                "id": info.id,
                "provider": info.provider,
                "default": DEFAULT_MODELS[info.provider] == info.id,
                "status": "retired" if verdict.retired else info.status,
                "retires": info.retires_on.isoformat() if info.retires_on else None,
                "successor": info.successor,
                "context_window": info.context_window,
                "max_input_tokens": info.max_input_tokens,
                "max_output_tokens": info.max_output_tokens,
                "prices": rates,
            }
        )
    return rows


def table_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The rows as a table: id (the provider's default marked *), provider, status, shutdown
    date, context window, and input, output and cache-read prices per million tokens."""
    if not rows:
        return ["No models"]
    width = max(len(row["id"]) for row in rows) + 2
    header = f"{'model':<{width}} {'provider':<9} {'status':<10} {'shuts down':<10} "
    header += f"{'window':>9} " + " ".join(f"{title:>8}" for _, title in PRICE_COLUMNS)
    lines = [header]
    for row in rows:
        name = f"{row['id']} *" if row["default"] else row["id"]
        prices = " ".join(f"{_price(row['prices'][key]):>8}" for key, _ in PRICE_COLUMNS)
        lines.append(
            f"{name:<{width}} {row['provider']:<9} {row['status']:<10} "
            f"{row['retires'] or '-':<10} {row['context_window']:>9,} {prices}"
        )
    lines.append("* the provider's default; prices in USD per million tokens")
    return lines


def _price(value: float) -> str:
    """Cents as cents (`3.00`), finer prices as given (`0.075`)."""
    return f"{value:.2f}" if round(value, 2) == value else f"{value:.4g}"
