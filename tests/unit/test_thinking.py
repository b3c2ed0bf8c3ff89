"""Tests of providers/thinking.py: the rules of SPEC.md section 1 for each provider's field.

The exact budgets are the module's; these tests check the rules they must obey, and the
feedback lines whose shape the reference gives.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from grove.providers.base import THINKING_LEVELS, ThinkingLevel
from grove.providers.catalog import MODELS, model_info
from grove.providers.thinking import (
    anthropic_effort,
    anthropic_thinking,
    describe_thinking,
    google_thinking_config,
    openai_reasoning,
)

ENABLED_LEVELS: tuple[ThinkingLevel, ...] = ("low", "med", "high")
ANTHROPIC_MODELS = [m for m, info in MODELS.items() if info.thinking_style == "anthropic_budget"]
ADAPTIVE_MODELS = [m for m, info in MODELS.items() if info.thinking_style == "anthropic_adaptive"]
ANTHROPIC_IDS = [*ANTHROPIC_MODELS, "claude-opus-4-5-20251101"]  # a snapshot: its model's
WARNING = "This model does not support disabling thinking"


# --- Anthropic ----------------------------------------------------------------------------


def budgets(model: str, max_tokens: int | None) -> list[int]:
    result = []
    for level in ENABLED_LEVELS:
        thinking, tokens = anthropic_thinking(model, level, max_tokens)
        assert thinking is not None
        assert thinking["type"] == "enabled"
        budget = thinking["budget_tokens"]
        assert isinstance(budget, int)
        assert 1024 <= budget < tokens <= model_info(model).max_output_tokens, (level, tokens)
        result.append(budget)
    return result


@pytest.mark.parametrize("model", ANTHROPIC_IDS)
@pytest.mark.parametrize("max_tokens", [None, 1, 1_025, 2_000, 16_384, 10_000_000])
def test_anthropic_budgets_obey_the_rules(model: str, max_tokens: int | None) -> None:
    low, med, high = budgets(model, max_tokens)
    assert low < med < high


@given(
    model=st.sampled_from(ANTHROPIC_IDS),
    max_tokens=st.one_of(st.none(), st.integers(1, 1_000_000)),
    level=st.sampled_from(ENABLED_LEVELS),
)
def test_anthropic_budget_rules_hold_for_any_max_tokens(
    model: str, max_tokens: int | None, level: ThinkingLevel
) -> None:
    thinking, tokens = anthropic_thinking(model, level, max_tokens)
    assert thinking is not None
    assert 1024 <= thinking["budget_tokens"] < tokens <= model_info(model).max_output_tokens


@pytest.mark.parametrize("model", ANTHROPIC_IDS)
@pytest.mark.parametrize("level", [None, "none"])
def test_anthropic_without_thinking_sends_no_field(model: str, level: ThinkingLevel | None) -> None:
    ceiling = model_info(model).max_output_tokens
    assert anthropic_thinking(model, level, 2_000) == (None, 2_000)
    assert anthropic_thinking(model, level, 10_000_000) == (None, ceiling)
    thinking, tokens = anthropic_thinking(model, level, None)
    assert thinking is None
    assert 0 < tokens <= ceiling


@pytest.mark.parametrize("model", ADAPTIVE_MODELS)
def test_anthropic_adaptive_models_take_an_effort_never_a_budget(model: str) -> None:
    info = model_info(model)
    efforts: tuple[tuple[ThinkingLevel, str], ...] = (
        ("low", "low"),
        ("med", "medium"),
        ("high", "high"),
    )
    for level, effort in efforts:
        thinking, tokens = anthropic_thinking(model, level, None)
        assert thinking == {"type": "adaptive"}
        assert anthropic_effort(model, level) == effort
        assert tokens <= info.max_output_tokens
        assert describe_thinking(model, level) == f"Thinking: {effort} effort"
    assert anthropic_thinking(model, None, None)[0] is None  # the provider's default
    assert anthropic_effort(model, None) is None
    thinking, _ = anthropic_thinking(model, "none", None)
    if "disabled" in info.thinking_accepts:
        assert thinking == {"type": "disabled"}
        assert anthropic_effort(model, "none") is None
        assert describe_thinking(model, "none") == "Thinking: none"
    elif "between_tools" in info.thinking_accepts:  # Sonnet 5.5: no thinking up front
        assert thinking == {"type": "between_tools"}
        assert anthropic_effort(model, "none") is None
        assert describe_thinking(model, "none") == "Thinking: between tools only (minimum)"
    else:  # always on: its lowest effort
        assert thinking == {"type": "adaptive"}
        assert anthropic_effort(model, "none") == "low"
        assert describe_thinking(model, "none") == "Thinking: low effort (minimum)"


def test_gemini_flash_without_minimal_thinks_at_its_lowest_for_none() -> None:
    assert google_thinking_config("gemini-3.8-flash", "none") == (
        {"thinkingLevel": "low", "includeThoughts": True},
        WARNING,
    )
    levels: tuple[tuple[ThinkingLevel, str], ...] = (
        ("low", "low"),
        ("med", "medium"),
        ("high", "high"),
    )
    for level, value in levels:
        config, warning = google_thinking_config("gemini-3.8-flash", level)
        assert (config or {}).get("thinkingLevel") == value and warning is None
    assert describe_thinking("gemini-3.8-flash", "none") == "Thinking: LOW level (minimum)"


def test_anthropic_keeps_a_large_enough_max_tokens() -> None:
    thinking, tokens = anthropic_thinking("claude-sonnet-4-5", "low", 60_000)
    assert thinking is not None
    assert tokens == 60_000


# --- OpenAI -------------------------------------------------------------------------------


@pytest.mark.parametrize("model", ["gpt-5", "gpt-5-mini", "gpt-5-nano"])
def test_openai_gpt_5_family_maps_none_to_minimal(model: str) -> None:
    assert openai_reasoning(model, "none") == {"effort": "minimal"}
    assert openai_reasoning(model, "low") == {"effort": "low", "summary": "auto"}
    assert openai_reasoning(model, "med") == {"effort": "medium", "summary": "auto"}
    assert openai_reasoning(model, "high") == {"effort": "high", "summary": "auto"}
    assert openai_reasoning(model, None) is None


@pytest.mark.parametrize("model", ["gpt-5.1", "gpt-5.2", "gpt-7"])
def test_openai_later_models_accept_effort_none(model: str) -> None:
    assert openai_reasoning(model, "none") == {"effort": "none"}
    assert openai_reasoning(model, "med") == {"effort": "medium", "summary": "auto"}
    assert openai_reasoning(model, None) is None


# --- Google -------------------------------------------------------------------------------


@pytest.mark.parametrize("model", ["gemini-2.5-flash", "gemini-2.5-flash-lite"])
def test_gemini_2_5_flash_can_disable_thinking(model: str) -> None:
    assert google_thinking_config(model, "none") == ({"thinkingBudget": 0}, None)
    assert google_thinking_config(model, None) == (None, None)
    previous = 0
    for level in ENABLED_LEVELS:
        config, warning = google_thinking_config(model, level)
        assert warning is None
        assert config is not None
        assert config["includeThoughts"] is True
        assert config["thinkingBudget"] > previous
        previous = config["thinkingBudget"]


def test_gemini_2_5_pro_cannot_disable_thinking() -> None:
    config, warning = google_thinking_config("gemini-2.5-pro", "none")
    assert warning == WARNING
    assert config is not None
    minimum = config["thinkingBudget"]
    assert minimum > 0
    assert config["includeThoughts"] is True
    for level in ENABLED_LEVELS:
        config, warning = google_thinking_config("gemini-2.5-pro", level)
        assert warning is None
        assert config is not None
        assert config["thinkingBudget"] > minimum
        assert config["includeThoughts"] is True


def test_gemini_3_flash_uses_thinking_levels() -> None:
    expected = {"none": "minimal", "low": "low", "med": "medium", "high": "high"}
    for level, value in expected.items():
        config, warning = google_thinking_config("gemini-3.5-flash", level)  # type: ignore[arg-type]
        assert warning is None
        assert config is not None
        assert config["thinkingLevel"] == value
        assert config.get("includeThoughts") is (None if level == "none" else True)
    assert google_thinking_config("gemini-3.5-flash", None) == (None, None)


@pytest.mark.parametrize("model", ["gemini-3-pro-preview"])
def test_gemini_3_pro_uses_low_or_high_only(model: str) -> None:
    assert google_thinking_config(model, "none") == (
        {"thinkingLevel": "low", "includeThoughts": True},
        WARNING,
    )
    assert google_thinking_config(model, "low") == (
        {"thinkingLevel": "low", "includeThoughts": True},
        None,
    )
    for level in ("med", "high"):
        assert google_thinking_config(model, level) == (
            {"thinkingLevel": "high", "includeThoughts": True},
            None,
        )


@given(
    model=st.sampled_from([m for m, info in MODELS.items() if info.provider == "google"]),
    level=st.sampled_from(THINKING_LEVELS),
)
def test_gemini_include_thoughts_exactly_when_thinking_is_on(
    model: str, level: ThinkingLevel
) -> None:
    config, warning = google_thinking_config(model, level)
    assert config is not None
    thinking_off = config.get("thinkingBudget") == 0 or config.get("thinkingLevel") == "minimal"
    assert ("includeThoughts" in config) is not thinking_off
    assert (warning is not None) is (level == "none" and not model_info(model).can_disable_thinking)


# --- feedback lines -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "level", "line"),
    [
        ("claude-sonnet-4-5", "med", "Thinking: med (budget 43,008 tokens)"),
        ("gpt-5-mini", "med", "Thinking: medium effort"),
        ("gpt-5", "none", "Thinking: minimal effort"),
        ("gemini-3-pro-preview", "none", "Thinking: LOW level (minimum)"),
        ("gemini-3-pro-preview", "med", "Thinking: HIGH level"),
        ("gemini-3.5-flash", "med", "Thinking: MEDIUM level"),
        ("claude-sonnet-4-5", None, "Thinking: provider default"),
        ("gpt-5-mini", None, "Thinking: provider default"),
        ("gemini-3.5-flash", None, "Thinking: provider default"),
        ("claude-haiku-4-5", "none", "Thinking: none"),
        ("gemini-2.5-flash", "none", "Thinking: none"),
        # Today's models: each line says what is sent
        ("claude-sonnet-5-5", "med", "Thinking: medium effort"),
        ("claude-sonnet-5-5", "none", "Thinking: between tools only (minimum)"),
        ("claude-opus-5-5", "none", "Thinking: low effort (minimum)"),
        ("claude-fable-5-2", "none", "Thinking: low effort (minimum)"),
        ("claude-haiku-5-5", "none", "Thinking: none"),
        ("gpt-6.1-sol", "none", "Thinking: low effort (minimum)"),
        ("gpt-6.1-terra", "none", "Thinking: none"),
        ("gpt-6.2-sol", "high", "Thinking: high effort"),
        ("gemini-3.8-flash", "none", "Thinking: LOW level (minimum)"),
        ("gemini-3.5-flash", "none", "Thinking: MINIMAL level"),
        ("gemini-4-argon", "med", "Thinking: MEDIUM level"),
    ],
)
def test_describe_thinking_lines(model: str, level: ThinkingLevel | None, line: str) -> None:
    assert describe_thinking(model, level) == line


@pytest.mark.parametrize("model", ANTHROPIC_IDS)
@pytest.mark.parametrize("level", ENABLED_LEVELS)
def test_described_anthropic_budget_is_the_one_sent(model: str, level: ThinkingLevel) -> None:
    thinking, _ = anthropic_thinking(model, level, None)
    assert thinking is not None
    assert describe_thinking(model, level) == (
        f"Thinking: {level} (budget {thinking['budget_tokens']:,} tokens)"
    )


def test_described_gemini_2_5_budget_is_the_one_sent() -> None:
    config, _ = google_thinking_config("gemini-2.5-pro", "none")
    assert config is not None
    line = describe_thinking("gemini-2.5-pro", "none")
    assert line == f"Thinking: none (budget {config['thinkingBudget']:,} tokens) (minimum)"
