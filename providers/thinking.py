"""Thinking levels (none|low|med|high) mapped to each API's fields, and the feedback lines.

`level=None` always means the provider's own default: no thinking field is sent at all. What a
model takes is the catalog's (its thinking types, efforts and levels: SPEC.md section 17), so
nothing sent is a setting the model refuses; the numbers are Grove's, the rules they obey
section 1's. Each mapping is worked out once per model and level, not at every request.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from grove.providers.base import JSONObject, ThinkingLevel
from grove.providers.catalog import model_info
from grove.providers.model_records import ModelInfo

CANNOT_DISABLE_WARNING = "This model does not support disabling thinking"
# Models keep a few thousand mappings (ids times levels) at most; ids from a config are few.
MAPPINGS_KEPT = 4096

# --- Anthropic: thinking.budget_tokens ------------------------------------------------------
# The budget spans [1024, max output): low, med and high take 1/3, 2/3 and 7/8 of the span
# above the minimum (claude-sonnet-4-5: 22,016 / 43,008 / 56,128). max_tokens leaves room for
# the visible answer after the budget and never exceeds the model's maximum output.
ANTHROPIC_MIN_BUDGET = 1024
ANTHROPIC_BUDGET_FRACTIONS: dict[ThinkingLevel, float] = {"low": 1 / 3, "med": 2 / 3, "high": 7 / 8}
DEFAULT_MAX_TOKENS = 16_384
ANSWER_ROOM_TOKENS = 4_096

# --- Anthropic adaptive thinking (Claude 4.6 and later): thinking.type, output_config.effort --
# Budgets are refused there; the model decides how much to think, at an effort. For "none" a
# model gets what it takes of: `disabled`; `between_tools` (Claude Sonnet 5.5: no thinking
# before the answer, only notes between tool calls); else, thinking always on, its lowest
# effort. The last two with the warning line.
ANTHROPIC_EFFORTS: dict[ThinkingLevel, str] = {"low": "low", "med": "medium", "high": "high"}
# Every effort value of either vendor, lowest first: a level a model lacks becomes the nearest
# one it has (the higher of two as near).
EFFORT_LADDER = ("none", "minimal", "low", "medium", "high", "xhigh", "max")

# --- OpenAI: reasoning.effort ---------------------------------------------------------------
# The plain mapping, for a compatible server's own model (the catalog knows nothing of it).
# Catalog models get the nearest effort they take: "none" where they take it (gpt-5.1, GPT-6
# Sol and Luna, 6.1 Terra), else "minimal" (gpt-5), else their lowest with the warning line
# (GPT-6 Astra, 6.1 Sol, 6.2 Sol).
OPENAI_EFFORTS: dict[ThinkingLevel, str] = {
    "none": "minimal",
    "low": "low",
    "med": "medium",
    "high": "high",
}
# Efforts that stream no reasoning summary.
OPENAI_QUIET_EFFORTS = frozenset({"none", "minimal"})

# --- Google 2.5: thinkingBudget; 3.x and later: thinkingLevel -------------------------------
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
GEMINI_LADDER = ("minimal", "low", "medium", "high")


def nearest(wanted: str, offered: tuple[str, ...], ladder: tuple[str, ...]) -> str:
    """`wanted` if offered, else the offered value nearest to it on `ladder` (the higher of two
    as near); `wanted` when nothing on the ladder is offered."""
    if wanted in offered:
        return wanted
    place = ladder.index(wanted)
    candidates = [value for value in ladder if value in offered]
    if not candidates:
        return wanted
    return min(
        candidates, key=lambda value: (abs(ladder.index(value) - place), -ladder.index(value))
    )


# --- Anthropic ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AnthropicThinking:
    """What a request sends for a level: `thinking.type` (None: no field), a budget (with
    `enabled`), `output_config.effort`, the warning line; `thinks` says whether the model
    thinks before answering with these settings (its default counted)."""

    kind: str | None
    budget: int | None = None
    effort: str | None = None
    warning: str | None = None
    thinks: bool = False


def anthropic_budget(info: ModelInfo, level: ThinkingLevel) -> int:
    span = info.max_output_tokens - ANTHROPIC_MIN_BUDGET
    return ANTHROPIC_MIN_BUDGET + int(span * ANTHROPIC_BUDGET_FRACTIONS[level])


@lru_cache(maxsize=MAPPINGS_KEPT)
def anthropic_plan(model: str, level: ThinkingLevel | None) -> AnthropicThinking:
    """The settings `model` is sent for `level` (a compatible server's own id: its family's)."""
    info = model_info(model, "anthropic")
    thinks_by_default = info.thinking_default not in (None, "disabled")
    if level is None:
        return AnthropicThinking(None, thinks=thinks_by_default)
    if info.thinking_style == "anthropic_budget":
        if level != "none":
            return AnthropicThinking("enabled", budget=anthropic_budget(info, level), thinks=True)
        off = "disabled" if thinks_by_default and "disabled" in info.thinking_accepts else None
        return AnthropicThinking(off)
    if level != "none":
        effort = _anthropic_effort(info, ANTHROPIC_EFFORTS[level])
        return AnthropicThinking("adaptive", effort=effort, thinks=True)
    if "disabled" in info.thinking_accepts:
        return AnthropicThinking("disabled")
    if "between_tools" in info.thinking_accepts:
        return AnthropicThinking("between_tools", warning=CANNOT_DISABLE_WARNING)
    lowest = _anthropic_effort(info, "low")
    return AnthropicThinking("adaptive", effort=lowest, warning=CANNOT_DISABLE_WARNING, thinks=True)


def _anthropic_effort(info: ModelInfo, wanted: str) -> str | None:
    """The effort to send (None for a model that takes none)."""
    if not info.effort_levels:
        return None
    return nearest(wanted, info.effort_levels, EFFORT_LADDER)


def anthropic_fields(
    plan: AnthropicThinking, model: str, max_tokens: int | None
) -> tuple[JSONObject | None, int]:
    """The `thinking` field (None: send none) and the `max_tokens` to send with `plan`."""
    ceiling = model_info(model, "anthropic").max_output_tokens
    tokens = min(max_tokens or DEFAULT_MAX_TOKENS, ceiling)
    if plan.kind is None:
        return None, tokens
    if plan.budget is None:
        return {"type": plan.kind}, tokens
    tokens = min(ceiling, max(tokens, plan.budget + ANSWER_ROOM_TOKENS))
    budget = max(ANTHROPIC_MIN_BUDGET, min(plan.budget, tokens - 1))
    tokens = max(tokens, budget + 1)
    return {"type": plan.kind, "budget_tokens": budget}, tokens


def anthropic_thinking(
    model: str, level: ThinkingLevel | None, max_tokens: int | None
) -> tuple[JSONObject | None, int]:
    """The `thinking` field (None: send none) and the `max_tokens` to send with it."""
    return anthropic_fields(anthropic_plan(model, level), model, max_tokens)


def anthropic_effort(model: str, level: ThinkingLevel | None) -> str | None:
    """`output_config.effort` for a level (None: send none)."""
    return anthropic_plan(model, level).effort


# --- OpenAI ---------------------------------------------------------------------------------


@lru_cache(maxsize=MAPPINGS_KEPT)
def openai_plan(model: str, level: ThinkingLevel) -> tuple[str, str | None]:
    """`reasoning.effort` for a level, and the warning line (a model that cannot stop
    reasoning, for "none")."""
    offered = model_info(model, "openai").effort_levels
    if not offered:
        return OPENAI_EFFORTS[level], None
    if level != "none":
        return nearest(OPENAI_EFFORTS[level], offered, EFFORT_LADDER), None
    quiet = [effort for effort in ("none", "minimal") if effort in offered]
    if quiet:
        return quiet[0], None
    return nearest("none", offered, EFFORT_LADDER), CANNOT_DISABLE_WARNING


def openai_effort(model: str, level: ThinkingLevel) -> str:
    return openai_plan(model, level)[0]


def openai_warning(model: str, level: ThinkingLevel | None) -> str | None:
    return None if level is None else openai_plan(model, level)[1]


def openai_reasoning(model: str, level: ThinkingLevel | None) -> JSONObject | None:
    """The Responses `reasoning` object; summaries stream whenever the model reasons."""
    if level is None:
        return None
    effort = openai_effort(model, level)
    reasoning: JSONObject = {"effort": effort}
    if effort not in OPENAI_QUIET_EFFORTS:
        reasoning["summary"] = "auto"
    return reasoning


# --- Google ---------------------------------------------------------------------------------


@lru_cache(maxsize=MAPPINGS_KEPT)
def _google_plan(
    model: str, level: ThinkingLevel
) -> tuple[tuple[tuple[str, Any], ...], str | None]:
    """The `thinkingConfig` fields for a level, and the warning line."""
    info = model_info(model, "google")
    fields: list[tuple[str, Any]]
    if info.thinking_style == "gemini_level":
        offered = tuple(value for value in GEMINI_LADDER if value in info.thinking_accepts)
        value = nearest(GEMINI_LEVELS[level], offered, GEMINI_LADDER)
        fields = [("thinkingLevel", value)]
        thinking_on = value != "minimal"
    elif level == "none" and info.can_disable_thinking:
        fields, thinking_on = [("thinkingBudget", 0)], False
    else:
        budgets = GEMINI_BUDGETS if info.can_disable_thinking else GEMINI_PRO_BUDGETS
        fields, thinking_on = [("thinkingBudget", budgets[level])], True
    if thinking_on:
        fields.append(("includeThoughts", True))
    warning = CANNOT_DISABLE_WARNING if level == "none" and thinking_on else None
    return tuple(fields), warning


def google_thinking_config(
    model: str, level: ThinkingLevel | None
) -> tuple[JSONObject | None, str | None]:
    """`generationConfig.thinkingConfig` and a warning line to show, if any."""
    if level is None:
        return None, None
    fields, warning = _google_plan(model, level)
    return dict(fields), warning


# --- feedback lines -------------------------------------------------------------------------


def describe_thinking(model: str, level: ThinkingLevel | None) -> str:
    """The indented feedback line after a switch, e.g. `Thinking: med (budget 43,008 tokens)`."""
    if level is None:
        return "Thinking: provider default"
    info = model_info(model)
    minimum = " (minimum)" if level == "none" else ""
    if info.provider == "anthropic":
        plan = anthropic_plan(model, level)
        if plan.budget is not None:
            thinking, _ = anthropic_fields(plan, model, None)
            assert thinking is not None
            return f"Thinking: {level} (budget {thinking['budget_tokens']:,} tokens)"
        if plan.kind == "between_tools":
            return "Thinking: between tools only (minimum)"
        return f"Thinking: {plan.effort} effort{minimum}" if plan.thinks else "Thinking: none"
    if info.provider == "openai":
        effort, warning = openai_plan(model, level)
        if effort == "none":
            return "Thinking: none"
        return f"Thinking: {effort} effort{' (minimum)' if warning else ''}"
    config, warning = google_thinking_config(model, level)
    assert config is not None
    note = " (minimum)" if warning else ""
    if "thinkingLevel" in config:
        return f"Thinking: {str(config['thinkingLevel']).upper()} level{note}"
    budget = int(config["thinkingBudget"])
    if budget == 0:
        return "Thinking: none"
    return f"Thinking: {level} (budget {budget:,} tokens){note}"
