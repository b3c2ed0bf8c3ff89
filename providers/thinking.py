"""Thinking levels (none|low|med|high) mapped to each API's fields, and the feedback lines.

`level=None` always means the provider's own default: no thinking field is sent at all.
The numbers below are Grove's; the rules they obey are SPEC.md section 1's.
"""

from __future__ import annotations

from providers.base import JSONObject, ThinkingLevel
from providers.catalog import ModelInfo, model_info

# --- Anthropic: thinking.budget_tokens ------------------------------------------------------
# The budget spans [1024, max output): low, med and high take 1/3, 2/3 and 7/8 of the span
# above the minimum (claude-sonnet-4-5: 22,016 / 43,008 / 56,128). max_tokens leaves room for
# the visible answer after the budget and never exceeds the model's maximum output.
ANTHROPIC_MIN_BUDGET = 1024
ANTHROPIC_BUDGET_FRACTIONS: dict[ThinkingLevel, float] = {"low": 1 / 3, "med": 2 / 3, "high": 7 / 8}
DEFAULT_MAX_TOKENS = 16_384
ANSWER_ROOM_TOKENS = 4_096

# --- Anthropic adaptive thinking (Claude 5 and later): thinking.type and output_config.effort --
# Manual budgets are refused there; the model decides how much to think, at an effort. Models
# whose thinking is always on take the lowest effort for "none".
ANTHROPIC_EFFORTS: dict[ThinkingLevel, str] = {"low": "low", "med": "medium", "high": "high"}

# --- OpenAI: reasoning.effort ---------------------------------------------------------------
OPENAI_EFFORTS: dict[ThinkingLevel, str] = {
    "none": "minimal",
    "low": "low",
    "med": "medium",
    "high": "high",
}

# --- Google 2.5: thinkingBudget; 3.x: thinkingLevel -----------------------------------------
GEMINI_BUDGETS: dict[ThinkingLevel, int] = {"low": 2_048, "med": 8_192, "high": 24_576}
GEMINI_PRO_BUDGETS: dict[ThinkingLevel, int] = {
    "none": 128,
    "low": 2_048,
    "med": 8_192,
    "high": 32_768,
}
GEMINI_LEVELS: dict[ThinkingLevel, str] = {
    "none": "minimal",
    "low": "low",
    "med": "medium",
    "high": "high",
}
GEMINI_PRO_LEVELS: dict[ThinkingLevel, str] = {
    "none": "low",
    "low": "low",
    "med": "high",
    "high": "high",
}
# Flash models from 3.8 on have no "minimal": thinking stays on, at its lowest for "none".
GEMINI_FLOOR_LEVELS: dict[ThinkingLevel, str] = {**GEMINI_LEVELS, "none": "low"}
CANNOT_DISABLE_WARNING = "This model does not support disabling thinking"


def anthropic_budget(info: ModelInfo, level: ThinkingLevel) -> int:
    span = info.max_output_tokens - ANTHROPIC_MIN_BUDGET
    return ANTHROPIC_MIN_BUDGET + int(span * ANTHROPIC_BUDGET_FRACTIONS[level])


def anthropic_thinking(
    model: str, level: ThinkingLevel | None, max_tokens: int | None
) -> tuple[JSONObject | None, int]:
    """The `thinking` field (None: send none) and the `max_tokens` to send with it."""
    info = model_info(model, "anthropic")
    ceiling = info.max_output_tokens
    tokens = min(max_tokens or DEFAULT_MAX_TOKENS, ceiling)
    if info.thinking_style == "anthropic_adaptive":
        if level is None:
            return None, tokens
        off = level == "none" and info.can_disable_thinking
        return {"type": "disabled" if off else "adaptive"}, tokens
    if level is None or level == "none":
        return None, tokens
    budget = anthropic_budget(info, level)
    tokens = min(ceiling, max(tokens, budget + ANSWER_ROOM_TOKENS))
    budget = max(ANTHROPIC_MIN_BUDGET, min(budget, tokens - 1))
    tokens = max(tokens, budget + 1)
    return {"type": "enabled", "budget_tokens": budget}, tokens


def anthropic_effort(model: str, level: ThinkingLevel | None) -> str | None:
    """`output_config.effort` for an adaptive model's level (None: send none)."""
    info = model_info(model, "anthropic")
    if info.thinking_style != "anthropic_adaptive" or level is None:
        return None
    if level == "none":
        return None if info.can_disable_thinking else ANTHROPIC_EFFORTS["low"]
    return ANTHROPIC_EFFORTS[level]


def openai_effort(model: str, level: ThinkingLevel) -> str:
    info = model_info(model, "openai")
    if level == "none" and info.thinking_style == "openai_effort_none":
        return "none"
    return OPENAI_EFFORTS[level]


def openai_reasoning(model: str, level: ThinkingLevel | None) -> JSONObject | None:
    """The Responses `reasoning` object; summaries stream whenever thinking is on."""
    if level is None:
        return None
    reasoning: JSONObject = {"effort": openai_effort(model, level)}
    if level != "none":
        reasoning["summary"] = "auto"
    return reasoning


def google_thinking_config(
    model: str, level: ThinkingLevel | None
) -> tuple[JSONObject | None, str | None]:
    """`generationConfig.thinkingConfig` and a warning line to show, if any."""
    if level is None:
        return None, None
    info = model_info(model, "google")
    warning = CANNOT_DISABLE_WARNING if level == "none" and not info.can_disable_thinking else None
    thinking_on = level != "none" or not info.can_disable_thinking
    config: JSONObject
    if info.thinking_style == "gemini_level":
        config = {"thinkingLevel": gemini_levels(info)[level]}
    elif info.can_disable_thinking:
        config = {"thinkingBudget": 0 if level == "none" else GEMINI_BUDGETS[level]}
    else:
        config = {"thinkingBudget": GEMINI_PRO_BUDGETS[level]}
    if thinking_on:
        config["includeThoughts"] = True
    return config, warning


def gemini_levels(info: ModelInfo) -> dict[ThinkingLevel, str]:
    if info.can_disable_thinking:
        return GEMINI_LEVELS
    return GEMINI_PRO_LEVELS if "pro" in info.id else GEMINI_FLOOR_LEVELS


def describe_thinking(model: str, level: ThinkingLevel | None) -> str:
    """The indented feedback line after a switch, e.g. `Thinking: med (budget 43,008 tokens)`."""
    if level is None:
        return "Thinking: provider default"
    info = model_info(model)
    style = info.thinking_style
    if style == "anthropic_budget":
        if level == "none":
            return "Thinking: none"
        thinking, _ = anthropic_thinking(model, level, None)
        assert thinking is not None
        return f"Thinking: {level} (budget {thinking['budget_tokens']:,} tokens)"
    if style == "anthropic_adaptive":
        effort = anthropic_effort(model, level)
        note = " (minimum)" if level == "none" and effort is not None else ""
        return f"Thinking: {effort} effort{note}" if effort else "Thinking: none"
    if style in ("openai_effort", "openai_effort_none"):
        return f"Thinking: {openai_effort(model, level)} effort"
    config, _ = google_thinking_config(model, level)
    assert config is not None
    if style == "gemini_level":
        value = str(config["thinkingLevel"])
        forced = not info.can_disable_thinking and gemini_levels(info)[level] != _plain(level)
        note = " (minimum)" if forced and value == "low" else ""
        return f"Thinking: {value.upper()} level{note}"
    budget = int(config["thinkingBudget"])
    if budget == 0:
        return "Thinking: none"
    note = " (minimum)" if level == "none" else ""
    return f"Thinking: {level} (budget {budget:,} tokens){note}"


def _plain(level: ThinkingLevel) -> str:
    return GEMINI_LEVELS[level]
