"""Tests of the catalog's data file (providers/models.json) and its reader, catalog_file.py.

The figures checked here are those issue 37 names, each as the vendor's page gives it.
"""

from __future__ import annotations

import copy
import json
import tomllib
from datetime import date
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from grove.providers.base import Usage
from grove.providers.catalog import CATALOG, MODELS, model_info
from grove.providers.catalog_file import parse_catalog
from grove.providers.errors import CatalogError
from grove.providers.pricing import cost_usd

RAW: dict[str, Any] = json.loads(
    resources.files("providers").joinpath("models.json").read_text(encoding="utf-8")
)


def mutated(path: str, value: object) -> dict[str, Any]:
    """The data file with the value at `path` (keys and list indexes between slashes)
    replaced; `...` deletes it."""
    data = copy.deepcopy(RAW)
    *parents, last = path.split("/")
    node: Any = data
    for step in parents:
        node = node[int(step)] if isinstance(node, list) else node[step]
    place: Any = int(last) if isinstance(node, list) else last
    if value is ...:
        del node[place]
    else:
        node[place] = value
    return data


def first(model: str) -> str:
    """The index of `model` in the data file's list."""
    return str(next(i for i, entry in enumerate(RAW["models"]) if entry["id"] == model))


# --- the reader ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("as_of", "4 Dec", "models.json.as_of must be a date (YYYY-MM-DD), got '4 Dec'"),
        ("models", {}, "models.json.models must be a list of models, got {}"),
        (
            f"models/{first('claude-opus-5-5')}/prices/cache_read",
            "0.20",
            "models.json: models[{i}] (claude-opus-5-5).prices.cache_read must be a price in USD "
            "per million tokens (0 to 10,000), got '0.20'",
        ),
        (
            f"models/{first('claude-opus-5-5')}/prices/input",
            -1,
            "(claude-opus-5-5).prices.input must be a price in USD per million tokens",
        ),
        (
            f"models/{first('gpt-6-sol')}/max_input_tokens",
            2_000_000,
            "(gpt-6-sol).max_input_tokens must be at most the context window (1,050,000), got "
            "2000000",
        ),
        (
            f"models/{first('gpt-6-sol')}/context_window",
            True,
            "(gpt-6-sol).context_window must be a whole number of tokens, got true",
        ),
        (
            f"models/{first('claude-sonnet-5-5')}/status",
            "active",
            "(claude-sonnet-5-5).status must be one of current, legacy, deprecated, retired, "
            "got 'active'",
        ),
        (
            f"models/{first('claude-sonnet-5-5')}/thinking/refuses",
            ["adaptive"],
            "(claude-sonnet-5-5).thinking.refuses must share no value with accepts",
        ),
        (
            f"models/{first('claude-sonnet-5-5')}/thinking/accepts",
            ["adaptive", "sometimes"],
            "(claude-sonnet-5-5).thinking.accepts must be a list of values among adaptive, "
            "between_tools,",
        ),
        (
            f"models/{first('claude-sonnet-5-5')}/sources",
            [],
            "(claude-sonnet-5-5).sources must name at least one source page, got []",
        ),
        (
            f"models/{first('claude-sonnet-5-5')}/sources",
            ["a.blog"],
            "(claude-sonnet-5-5).sources must name keys of the top-level sources ('a.blog' is "
            "not one)",
        ),
        (
            f"models/{first('gemini-3.8-flash')}/prices/changes/0/from",
            None,
            "(gemini-3.8-flash).prices.changes[0].from must be a date (YYYY-MM-DD), got null",
        ),
        (
            f"models/{first('claude-sonnet-4-5')}/retires",
            ...,
            "model claude-sonnet-4-5 is retired and must give its retirement date (retires)",
        ),
        (
            f"models/{first('claude-sonnet-4-5')}/successor",
            "claude-sonnet-4-6",
            "model claude-sonnet-4-5: successor 'claude-sonnet-4-6' must be a current anthropic "
            "model of the file",
        ),
        (
            "families/openai/default",
            "gpt-5-mini",
            "models.json.families.openai.default must name a current openai model of the file, "
            "got 'gpt-5-mini'",
        ),
        ("sources/openai.models", "http://example.com", "must be an https:// address"),
        (
            f"models/{first('claude-opus-4-5')}/retirs",
            "2027-01-22",
            "models.json: models[{i}] has no key 'retirs' (it takes assistant_prefill, "
            "cache_min_tokens,",
        ),
        (
            f"models/{first('gpt-6-sol')}/prices/long_context/above_tokens",
            272_000,
            "(gpt-6-sol).prices.long_context has no key 'above_tokens' (it takes "
            "above_input_tokens, cache_read,",
        ),
    ],
)
def test_a_malformed_data_file_is_refused_with_the_place_at_fault(
    path: str, value: object, message: str
) -> None:
    with pytest.raises(CatalogError) as caught:
        parse_catalog(mutated(path, value), "models.json")
    index = path.split("/")[1] if path.startswith("models/") else ""
    assert message.replace("{i}", index) in str(caught.value)


def test_price_changes_come_in_date_order() -> None:
    flash = first("gemini-3.8-flash")
    changes = RAW["models"][int(flash)]["prices"]["changes"]
    data = mutated(
        f"models/{flash}/prices/changes", [*changes, {**changes[0], "from": "2026-12-31"}]
    )
    with pytest.raises(CatalogError) as caught:
        parse_catalog(data)
    assert str(caught.value) == (
        "models.json: models[{i}] (gemini-3.8-flash).prices.changes[1].from must come after the "
        "previous price's date, got '2026-12-31'".replace("{i}", flash)
    )


def test_a_model_named_twice_is_refused() -> None:
    data = copy.deepcopy(RAW)
    data["models"].append(copy.deepcopy(data["models"][0]))
    with pytest.raises(CatalogError, match=r"must name each id once \('claude-fable-5-2'"):
        parse_catalog(data)


def leaves(data: object, path: str = "") -> list[str]:
    """Every key path of `data`, as `mutated` takes them."""
    if isinstance(data, dict):
        items = list(data.items())
    elif isinstance(data, list):
        items = list(enumerate(data))
    else:
        return [path]
    found = [path] if path else []
    for key, value in items:
        found += leaves(value, f"{path}/{key}" if path else str(key))
    return found


PATHS = leaves(RAW)


@given(
    path=st.sampled_from(PATHS),
    value=st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-10, 10**7),
        st.floats(allow_nan=True),
        st.text(max_size=12),
        st.lists(st.text(max_size=5), max_size=3),
        st.just({}),
        st.just(...),
    ),
)
def test_any_damage_to_the_data_file_is_a_catalog_error_or_a_catalog(
    path: str, value: object
) -> None:
    try:
        catalog = parse_catalog(mutated(path, value))
    except CatalogError as exc:
        assert str(exc).startswith("models.json")
    else:
        assert catalog.models


# --- the data -----------------------------------------------------------------------------


def test_the_data_file_ships_with_grove() -> None:
    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    assert "models.json" in pyproject["tool"]["setuptools"]["package-data"]["grove.providers"]


def test_every_model_names_its_source_pages() -> None:
    for info in MODELS.values():
        assert info.sources, info.id
        assert all(url.startswith("https://") for url in info.sources), info.id
    assert set(CATALOG.sources.values()) >= {url for i in MODELS.values() for url in i.sources}


def test_the_catalog_holds_todays_models() -> None:
    today = {
        "claude-fable-5-2",
        "claude-fable-5-1",
        "claude-opus-5-5",
        "claude-sonnet-5-5",
        "claude-haiku-5-5",
        "gpt-6-astra",
        "gpt-6-sol",
        "gpt-6.1-sol",
        "gpt-6.1-terra",
        "gpt-6.2-sol",
        "gpt-6-luna",
        "gemini-4-argon",
        "gemini-3.8-flash",
        "gemini-3.7-flash",
        "gemini-3.5-flash",
        "gemini-3.5-flash-lite",
        "gemini-3.1-pro-preview",
    }
    assert today <= set(MODELS)
    assert {"gemini-3.0-flash", "gemini-3.0-pro"}.isdisjoint(MODELS)  # ids Google never served


def test_the_figures_issue_37_names() -> None:
    assert MODELS["claude-opus-5-5"].price_cache_read == 0.20
    assert MODELS["claude-opus-5-5"].price_cache_write_1h == 8.0
    for model in ("claude-opus-5-5", "claude-sonnet-5-5", "claude-haiku-5-5"):
        assert MODELS[model].cache_min_tokens == 512, model
    for model in ("gemini-2.5-pro", "gemini-2.5-flash", "gemini-2.5-flash-lite"):
        assert MODELS[model].cache_min_tokens == 2048, model
    gpt6 = MODELS["gpt-6-sol"]
    assert (gpt6.context_window, gpt6.max_input_tokens) == (1_050_000, 922_000)
    assert gpt6.long_context is not None and gpt6.long_context.above_input_tokens == 272_000
    haiku = MODELS["claude-haiku-5-5"]
    assert haiku.long_context is not None and haiku.long_context.above_input_tokens == 100_000
    flash = MODELS["gemini-3.8-flash"]
    assert flash.rates_on(date(2026, 12, 31)).input == 0.75
    assert flash.rates_on(date(2027, 1, 1)).input == 1.50
    assert all(0 < info.batch_discount < 1 for info in MODELS.values())


@pytest.mark.parametrize(
    ("model", "retires", "successor"),
    [
        ("claude-sonnet-4-5", date(2026, 11, 30), "claude-sonnet-5-5"),
        ("gpt-5-mini", date(2026, 12, 11), "gpt-6.1-terra"),
        ("gpt-5", date(2026, 12, 11), "gpt-6.1-sol"),
        ("gpt-5-nano", date(2026, 12, 11), "gpt-6-luna"),
    ],
)
def test_retiring_models_name_their_date_and_successor(
    model: str, retires: date, successor: str
) -> None:
    info = MODELS[model]
    assert (info.retires_on, info.successor) == (retires, successor)
    assert info.status in ("deprecated", "retired")


def test_thinking_rules_of_the_5_5_models() -> None:
    sonnet, opus = MODELS["claude-sonnet-5-5"], MODELS["claude-opus-5-5"]
    assert "between_tools" in sonnet.thinking_accepts and "disabled" in sonnet.thinking_refuses
    assert opus.thinking_accepts == ("adaptive",) and not opus.can_disable_thinking
    for info in (sonnet, opus, MODELS["claude-fable-5-2"]):
        assert info.preserved_thinking and not info.forced_tool_choice
        assert not info.sampling_parameters and not info.assistant_prefill
        assert info.structured_output == "output_config"
    for model in ("gpt-6.1-sol", "gpt-6.2-sol"):
        assert "none" in MODELS[model].thinking_refuses, model
    assert not MODELS["gemini-4-argon"].explicit_cache  # implicit caching only
    assert MODELS["gemini-3.8-flash"].explicit_cache and not MODELS["gpt-6-sol"].explicit_cache


# --- prices at work -----------------------------------------------------------------------


def test_a_prompt_past_the_long_context_tier_is_billed_at_its_rates_throughout() -> None:
    day = CATALOG.as_of
    short = Usage(input_tokens=272_000, output_tokens=1_000, cache_read_tokens=72_000)
    long = Usage(input_tokens=272_001, output_tokens=1_000, cache_read_tokens=72_000)
    # gpt-6-sol: $2 / $10 / $0.20 cached; above 272K input: $4 / $15 / $0.40 cached.
    assert cost_usd("gpt-6-sol", short, day) == pytest.approx(
        (200_000 * 2.0 + 1_000 * 10.0 + 72_000 * 0.20) / 1e6
    )
    assert cost_usd("gpt-6-sol", long, day) == pytest.approx(
        (200_001 * 4.0 + 1_000 * 15.0 + 72_000 * 0.40) / 1e6
    )
    # claude-haiku-5-5: $0.10 / $0.50 up to 100K of prompt, $0.50 / $2.50 above.
    assert cost_usd("claude-haiku-5-5", Usage(input_tokens=100_001), day) == pytest.approx(
        100_001 * 0.50 / 1e6
    )


def test_a_dated_price_change_bills_requests_from_its_day() -> None:
    usage = Usage(input_tokens=1_000_000, output_tokens=1_000_000)
    today = cost_usd("gemini-3.8-flash", usage, date.today())
    assert cost_usd("gemini-3.8-flash", usage) == today  # no day given: today's prices
    assert cost_usd("gemini-3.8-flash", usage, date(2026, 12, 31)) == pytest.approx(0.75 + 3.75)
    assert cost_usd("gemini-3.8-flash", usage, date(2027, 1, 1)) == pytest.approx(1.50 + 7.50)
    # A new id of the family follows the family's prices and their changes.
    assert cost_usd("gemini-3.8-flash-preview-01", usage, date(2027, 1, 1)) == pytest.approx(9.0)


def test_compaction_budgets_use_the_maximum_input_not_the_window() -> None:
    assert model_info("gpt-6-sol").input_share(0.8) == 737_600  # 0.8 x 922K, not of 1.05M
    assert model_info("claude-sonnet-5-5").input_share(0.5) == 500_000
