"""Tests of providers/catalog.py: provider inference, `MODEL[/THINKING]` parsing, prices.

The expected user-facing texts and the Tab-completion list are copied literally from
spec/commands-model-fork.md, which binds them word for word.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from grove.providers.base import THINKING_LEVELS, Usage
from grove.providers.catalog import (
    CATALOG,
    DEFAULT_MODELS,
    MAX_NEAR_MISS_CHARS,
    MODELS,
    SUPPORTED_MODELS,
    completions,
    infer_provider,
    model_info,
    near_miss,
)
from grove.providers.errors import InvalidThinkingLevelError, UnknownModelError
from grove.providers.http import join_url
from grove.providers.model_specs import ModelSpec, parse_model_choice, parse_model_spec
from grove.providers.pricing import cache_saving_usd, cost_usd, set_prices

REFERENCE_UNKNOWN_MODEL = """\
Unknown model: unknown-model

Supported models:
  Anthropic: claude-haiku-5-5, claude-sonnet-5-5, claude-opus-5-5
  OpenAI:    gpt-6-luna, gpt-6.1-terra, gpt-6.2-sol
  Google:    gemini-3.5-flash-lite, gemini-3.8-flash, gemini-4-argon"""

REFERENCE_INVALID_THINKING = """\
Invalid thinking level: maximum
Valid levels: none, low, med, high"""

REFERENCE_TAB_COMPLETION = [
    "claude-haiku-5-5",
    "claude-sonnet-5-5",
    "claude-sonnet-5-5/none",
    "claude-sonnet-5-5/low",
    "claude-sonnet-5-5/med",
    "claude-sonnet-5-5/high",
    "claude-opus-5-5",
    "gpt-6-luna",
    "gpt-6.1-terra",
    "gpt-6.1-terra/none",
    "gpt-6.1-terra/low",
    "gpt-6.1-terra/med",
    "gpt-6.1-terra/high",
    "gpt-6.2-sol",
    "gemini-3.5-flash-lite",
    "gemini-3.8-flash",
    "gemini-3.8-flash/none",
    "gemini-3.8-flash/low",
    "gemini-3.8-flash/med",
    "gemini-3.8-flash/high",
    "gemini-4-argon",
]


# --- provider inference -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "provider"),
    [
        ("claude-sonnet-4-5", "anthropic"),
        ("claude-future-9", "anthropic"),
        ("gpt-5-mini", "openai"),
        ("gpt-7", "openai"),
        ("gemini-3.0-flash", "google"),
        ("gemini-9.0-ultra", "google"),
    ],
)
def test_provider_is_inferred_from_the_prefix(model: str, provider: str) -> None:
    assert infer_provider(model) == provider


@pytest.mark.parametrize(
    "model", ["unknown-model", "claude", "gpt5", "Gemini-3.0-flash", "o3-mini", "", " gpt-5"]
)
def test_ids_without_a_known_prefix_have_no_provider(model: str) -> None:
    assert infer_provider(model) is None


def test_prefixes_are_checked_in_the_reference_order() -> None:
    # Only the first matching prefix counts, so an id carrying two prefixes is decided by
    # where it starts.
    assert infer_provider("claude-gpt-gemini-") == "anthropic"
    assert infer_provider("gpt-claude-") == "openai"
    assert infer_provider("gemini-claude-") == "google"


def test_every_catalog_model_belongs_to_its_inferred_provider() -> None:
    for model, info in MODELS.items():
        assert info.id == model
        assert infer_provider(model) == info.provider
        assert info.known


@pytest.mark.parametrize(
    ("model", "family"),
    [
        ("claude-future-9", "claude-sonnet-5-5"),
        ("claude-opus-6", "claude-opus-5-5"),
        ("gpt-7", "gpt-6.1-terra"),
        ("gemini-9.0-ultra", "gemini-3.8-flash"),
        ("gemini-2.5-flash-preview", "gemini-2.5-flash"),
        ("gemini-2.5-flash-lite-preview-06-17", "gemini-2.5-flash-lite"),
        ("gpt-5-mini-2025-08-07", "gpt-5-mini"),
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
    ],
)
def test_a_new_id_with_a_known_prefix_gets_its_family_figures(model: str, family: str) -> None:
    info = model_info(model)
    known = MODELS[family]
    assert info.id == model
    assert not info.known
    assert info.provider == known.provider
    assert (info.context_window, info.max_output_tokens) == (
        known.context_window,
        known.max_output_tokens,
    )
    assert (info.price_input, info.price_output, info.price_cache_read) == (
        known.price_input,
        known.price_output,
        known.price_cache_read,
    )
    assert parse_model_spec(model) == ModelSpec(provider=known.provider, model=model)


def test_openai_ids_after_gpt_5_accept_effort_none() -> None:
    assert model_info("gpt-5").thinking_style == "openai_effort"
    assert model_info("gpt-5-pro").thinking_style == "openai_effort"
    assert model_info("gpt-5.1").thinking_style == "openai_effort_none"
    assert model_info("gpt-5.2-mini").thinking_style == "openai_effort_none"
    assert model_info("gpt-7").thinking_style == "openai_effort_none"


def test_model_info_of_an_unknown_prefix_is_the_reference_error() -> None:
    with pytest.raises(UnknownModelError) as caught:
        model_info("unknown-model")
    assert str(caught.value) == REFERENCE_UNKNOWN_MODEL
    assert caught.value.model == "unknown-model"


def test_default_models() -> None:
    assert DEFAULT_MODELS == {
        "anthropic": "claude-sonnet-5-5",
        "openai": "gpt-6.1-terra",
        "google": "gemini-3.8-flash",
    }
    assert all(model in MODELS for model in DEFAULT_MODELS.values())


def test_defaults_are_current_and_not_retiring_within_a_year() -> None:
    a_year_on = CATALOG.as_of + timedelta(days=365)
    for provider, model in DEFAULT_MODELS.items():
        info = MODELS[model]
        assert (info.provider, info.status, info.deprecated_on) == (provider, "current", None)
        assert info.retires_on is None or info.retires_on > a_year_on, model
    for listed in SUPPORTED_MODELS.values():
        assert len(listed) == 3
        assert all(MODELS[model].status == "current" for model in listed), listed


# --- MODEL[/THINKING] ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("claude-sonnet-5-5", ModelSpec(provider="anthropic", model="claude-sonnet-5-5")),
        (
            "claude-sonnet-5-5/med",
            ModelSpec(provider="anthropic", model="claude-sonnet-5-5", thinking="med"),
        ),
        (
            "gpt-6.1-terra/none",
            ModelSpec(provider="openai", model="gpt-6.1-terra", thinking="none"),
        ),
        (
            "gemini-3.8-flash/high",
            ModelSpec(provider="google", model="gemini-3.8-flash", thinking="high"),
        ),
        ("gpt-6.2-sol/high", ModelSpec(provider="openai", model="gpt-6.2-sol", thinking="high")),
    ],
)
def test_reference_examples_parse(text: str, expected: ModelSpec) -> None:
    spec = parse_model_spec(text)
    assert spec == expected
    assert str(spec) == text


def test_unknown_model_text_is_the_reference_text() -> None:
    with pytest.raises(UnknownModelError) as caught:
        parse_model_spec("unknown-model")
    assert str(caught.value) == REFERENCE_UNKNOWN_MODEL


def test_invalid_thinking_level_text_is_the_reference_text() -> None:
    with pytest.raises(InvalidThinkingLevelError) as caught:
        parse_model_spec("claude-sonnet-4-5/maximum")
    assert str(caught.value) == REFERENCE_INVALID_THINKING
    assert caught.value.level == "maximum"


@pytest.mark.parametrize("level", ["", "medium", "MED", "High", " low", "none/none"])
def test_only_the_four_levels_are_valid(level: str) -> None:
    with pytest.raises(InvalidThinkingLevelError) as caught:
        parse_model_spec(f"gpt-5-mini/{level}")
    assert str(caught.value).splitlines() == [
        f"Invalid thinking level: {level}",
        "Valid levels: none, low, med, high",
    ]


def test_the_thinking_level_is_checked_before_the_model() -> None:
    # The reference parses MODEL/THINKING first, then infers the provider.
    with pytest.raises(InvalidThinkingLevelError):
        parse_model_spec("unknown-model/maximum")
    with pytest.raises(UnknownModelError) as caught:
        parse_model_spec("unknown-model/med")
    assert str(caught.value).startswith("Unknown model: unknown-model\n")


def test_unknown_model_text_names_the_model_given() -> None:
    with pytest.raises(UnknownModelError) as caught:
        parse_model_spec("llama-4/low")
    assert str(caught.value) == REFERENCE_UNKNOWN_MODEL.replace("unknown-model", "llama-4")


def test_tab_completion_list_is_the_reference_list_in_order() -> None:
    assert completions() == REFERENCE_TAB_COMPLETION
    for item in completions():
        spec = parse_model_spec(item)
        assert spec.model in MODELS


# --- aliases ------------------------------------------------------------------------------

ALIASES = {
    "fast": "gemini-2.5-flash",
    "deep": "claude-opus-4-5/high",
    "broken": "mistral-large",
    "odd": "gpt-5/extreme",
}


def test_an_alias_stands_for_its_model() -> None:
    assert parse_model_spec("fast", ALIASES) == ModelSpec(
        provider="google", model="gemini-2.5-flash"
    )
    assert parse_model_spec("fast/low", ALIASES) == ModelSpec(
        provider="google", model="gemini-2.5-flash", thinking="low"
    )


def test_an_alias_level_is_a_default_that_the_user_can_override() -> None:
    assert parse_model_spec("deep", ALIASES).thinking == "high"
    assert parse_model_spec("deep/none", ALIASES) == ModelSpec(
        provider="anthropic", model="claude-opus-4-5", thinking="none"
    )


def test_aliases_to_bad_targets_fail_with_the_reference_texts() -> None:
    with pytest.raises(UnknownModelError) as unknown:
        parse_model_spec("broken", ALIASES)
    assert str(unknown.value).startswith("Unknown model: mistral-large\n")
    with pytest.raises(InvalidThinkingLevelError) as invalid:
        parse_model_spec("odd", ALIASES)
    assert str(invalid.value).startswith("Invalid thinking level: extreme\n")


def test_without_aliases_an_alias_name_is_unknown() -> None:
    with pytest.raises(UnknownModelError):
        parse_model_spec("fast")


@given(
    text=st.one_of(
        st.text(max_size=40),
        st.builds(
            "{}{}/{}".format,
            st.sampled_from(["claude-", "gpt-", "gemini-", "fast", "deep", "odd", "x"]),
            st.text(max_size=10),
            st.one_of(st.sampled_from(THINKING_LEVELS), st.text(max_size=6)),
        ),
    ),
    aliases=st.one_of(st.just(ALIASES), st.dictionaries(st.text(max_size=8), st.text(max_size=20))),
)
def test_any_text_parses_or_fails_with_a_model_spec_error(
    text: str, aliases: dict[str, str]
) -> None:
    try:
        spec = parse_model_spec(text, aliases)
    except (UnknownModelError, InvalidThinkingLevelError) as exc:
        assert str(exc).startswith(("Unknown model: ", "Invalid thinking level: "))
        return
    assert isinstance(spec, ModelSpec)
    assert infer_provider(spec.model) == spec.provider
    assert spec.thinking is None or spec.thinking in THINKING_LEVELS
    assert model_info(spec.model).provider == spec.provider


# --- cost ---------------------------------------------------------------------------------


def test_cost_of_an_anthropic_turn_bills_cache_reads_and_writes_at_their_prices() -> None:
    usage = Usage(
        input_tokens=1_300, output_tokens=500, cache_read_tokens=200, cache_write_tokens=100
    )
    # claude-sonnet-5-5: $2 in, $10 out, $0.20 cache read, $2.50 cache write per million;
    # input_tokens counts the whole prompt, read and written tokens included.
    expected = (1_000 * 2.0 + 500 * 10.0 + 200 * 0.20 + 100 * 2.50) / 1_000_000
    assert cost_usd("claude-sonnet-5-5", usage) == pytest.approx(expected)
    assert expected == pytest.approx(0.00729)


def test_an_hour_long_anthropic_write_costs_the_models_1h_price() -> None:
    usage = Usage(input_tokens=1_000, cache_write_tokens=1_000, cache_write_1h_tokens=600)
    expected = (400 * 2.50 + 600 * 4.0) / 1_000_000  # claude-sonnet-5-5: $4 for an hour
    assert cost_usd("claude-sonnet-5-5", usage) == pytest.approx(expected)
    set_prices({"claude-house": [3.0, 15.0, 0.30, 3.75]})  # a set price: twice the input
    try:
        assert cost_usd("claude-house", usage) == pytest.approx((400 * 3.75 + 600 * 6.0) / 1e6)
    finally:
        set_prices({})


def test_cache_saving_is_the_uncached_price_less_the_cost() -> None:
    read = Usage(input_tokens=10_000, output_tokens=10, cache_read_tokens=9_000)
    assert cache_saving_usd("claude-sonnet-5-5", read) == pytest.approx(9_000 * 1.8 / 1e6)
    written = Usage(input_tokens=10_000, cache_write_tokens=10_000)
    assert cache_saving_usd("claude-sonnet-5-5", written) == pytest.approx(-10_000 * 0.5 / 1e6)
    assert cache_saving_usd("gpt-5-mini", Usage(input_tokens=5, output_tokens=5)) == 0.0


def test_cost_of_an_openai_turn_bills_cached_input_at_the_cache_price() -> None:
    usage = Usage(input_tokens=1_000, output_tokens=500, cache_read_tokens=200)
    # gpt-5-mini: $0.25 in, $2 out, $0.025 cached per million; input counts cached tokens.
    expected = (800 * 0.25 + 500 * 2.0 + 200 * 0.025) / 1_000_000
    assert cost_usd("gpt-5-mini", usage) == pytest.approx(expected)
    assert expected == pytest.approx(0.001205)


def test_cost_below_the_long_context_tier_is_the_list_price() -> None:
    day = CATALOG.as_of
    for model, info in MODELS.items():
        prompt = Usage(input_tokens=100_000)
        assert cost_usd(model, prompt, day) == pytest.approx(info.price_input / 10), model
        answer = Usage(output_tokens=1_000_000)
        assert cost_usd(model, answer, day) == pytest.approx(info.price_output), model
    assert cost_usd("claude-haiku-4-5", Usage()) == 0.0


def test_cost_of_an_unknown_model_is_zero_and_of_a_new_id_its_family_price() -> None:
    usage = Usage(input_tokens=10_000, output_tokens=1_000)
    assert cost_usd("unknown-model", usage) == 0.0
    assert cost_usd("claude-future-9", usage) == cost_usd("claude-sonnet-5-5", usage)


def test_an_alias_can_name_a_provider_and_a_model_id_the_catalog_lacks() -> None:
    aliases = {"local": "openai:my-local-model/low", "claude-ish": "anthropic:house-model"}
    spec = parse_model_spec("local", aliases)
    assert (spec.provider, spec.model, spec.thinking) == ("openai", "my-local-model", "low")
    assert str(spec) == "openai:my-local-model/low"
    assert parse_model_spec(str(spec)) == spec  # what it prints parses back, alias or not
    assert parse_model_spec("claude-ish/high", aliases).provider == "anthropic"
    assert str(parse_model_spec("gpt-6.2-sol/low")) == "gpt-6.2-sol/low"  # catalog ids stay bare
    with pytest.raises(UnknownModelError):
        parse_model_spec("nosuchprovider:model")


@pytest.mark.parametrize(
    ("base", "path", "url"),
    [
        ("http://h:1", "/v1/messages", "http://h:1/v1/messages"),
        ("http://h:1/v1", "/v1/messages", "http://h:1/v1/messages"),
        ("http://h:1/v1/", "/v1/chat/completions", "http://h:1/v1/chat/completions"),
        (
            "http://h:1/api/v1beta",
            "/v1beta/models/x:streamGenerateContent",
            "http://h:1/api/v1beta/models/x:streamGenerateContent",
        ),
        ("http://h:1/v1", "/v1beta/models/x", "http://h:1/v1/v1beta/models/x"),
    ],
)
def test_a_base_url_ending_in_the_version_segment_is_not_doubled(
    base: str, path: str, url: str
) -> None:
    assert join_url(base, path) == url


@pytest.mark.parametrize(
    ("typo", "meant"),
    [
        ("claude-sonet-4-5", "claude-sonnet-4-5"),
        ("claude-hiaku-4-5", "claude-haiku-4-5"),
        ("claude-opsu-4-5-20251101", "claude-opus-4-5-20251101"),
        ("gpt-5-mni", "gpt-5-mini"),
        ("gpt-5-nanoo", "gpt-5-nano"),
        ("gemini-2.5-flsh", "gemini-2.5-flash"),
        ("gemini-2.5-flash-lte", "gemini-2.5-flash-lite"),
    ],
)
def test_a_typo_in_a_known_ids_words_gets_the_catalogs_spelling(typo: str, meant: str) -> None:
    assert near_miss(typo) == meant


@pytest.mark.parametrize(
    "model",
    [
        *MODELS,
        "claude-sonnet-4-6",  # a new version number
        "claude-sonnet-4-5-20250929",  # a dated snapshot
        "gpt-4o-mini",
        "gpt-5.4-mini",
        "gpt-5-chat-latest",
        "gemini-3-flash-preview",
        "gemini-2.5-flash-lite-preview-06-17",
        "claude-mythos-preview",  # a new name, far from every known word
        "unknown-model",
    ],
)
def test_known_ids_new_versions_and_new_names_are_no_near_miss(model: str) -> None:
    assert near_miss(model) is None


def test_an_id_longer_than_any_model_id_gets_no_near_miss() -> None:
    """The hint compares each word with every known one: a megabyte of words (a `/model`
    line sent to the service) would hold the supervisor for minutes."""
    typos = "claude-" + "-".join(["sonet"] * 20_000)
    assert near_miss(typos[:MAX_NEAR_MISS_CHARS]) is not None  # within the bound: a hint
    assert near_miss(typos) is None


def test_a_typo_of_a_retired_id_is_pointed_at_its_successor() -> None:
    with pytest.raises(UnknownModelError) as refused:
        parse_model_choice("claude-sonet-4-5")
    assert str(refused.value) == (
        "Unknown model: claude-sonet-4-5. Did you mean claude-sonnet-5-5? "
        "(To send claude-sonet-4-5 as written, name it anthropic:claude-sonet-4-5.)"
    )
    with pytest.raises(UnknownModelError) as current:
        parse_model_choice("claude-sonet-5-5")
    assert "Did you mean claude-sonnet-5-5?" in str(current.value)


def test_flex_and_batch_cost_half_of_standard_cache_reads_and_writes_too() -> None:
    usage = Usage(
        input_tokens=10_000, output_tokens=700, cache_read_tokens=6_000, cache_write_tokens=2_000
    )
    for model in ("claude-sonnet-5-5", "gpt-5-mini"):
        standard = cost_usd(model, usage)
        assert standard > 0
        assert cost_usd(model, usage, tier="standard") == standard
        assert cost_usd(model, usage, tier="batch") == pytest.approx(standard / 2)
        assert cost_usd(model, usage, tier="flex") == pytest.approx(standard / 2)
