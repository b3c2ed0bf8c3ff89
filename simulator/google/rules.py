"""What the Gemini API refuses of each model, as it refuses it: a retired id (404), a thinking
level or budget the model does not take, or both given at once (400).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from grove.simulator.model_rules import ModelRules, retired, rules_for
from grove.simulator.wire import InvalidRequest

# A retired id: 404 NOT_FOUND (as answered for a shut-down model, e.g. "models/gemini-pro is not
# found for API version v1beta, ...").
GEMINI_RETIRED = (
    "models/{model} is not found for API version {version}, or is not supported for "
    "generateContent. Call ListModels to see the list of available models and their supported "
    "methods."
)
# ai.google.dev/gemini-api/docs/thinking lists each model's levels; the messages as answered
# (RooCodeInc/Roo-Code#10700, earendil-works/pi#9455, sterlp/eclipse-peon-ai#115,
# snailyp/gemini-balance#206):
NO_LEVELS = "Thinking level is not supported for this model."
UNSUPPORTED_LEVEL = (
    "Thinking level {level} is not supported for this model. Please retry with other thinking "
    "level."
)
LEVEL_AND_BUDGET = "You can only set only one of thinking budget and thinking level."
NO_ZERO_BUDGET = "Budget 0 is invalid. This model only works in thinking mode."


def check_gemini(model: str, version: str, config: Mapping[str, Any] | None) -> None:
    """InvalidRequest for what the model refuses; `config` is the request's `thinkingConfig`
    with its fields by their JSON names, `version` the URL's API version."""
    if retired(model):
        raise InvalidRequest(
            GEMINI_RETIRED.format(model=model, version=version), problem="model_not_found"
        )
    rules = rules_for(model)
    if rules is not None:
        refuse_gemini(rules, config)


def refuse_gemini(rules: ModelRules, config: Mapping[str, Any] | None) -> None:
    """What `check_gemini` refuses beyond a retired model, with the rules given."""
    if not config:
        return
    level, budget = config.get("thinkingLevel"), config.get("thinkingBudget")
    if level is not None and budget is not None:
        raise InvalidRequest(LEVEL_AND_BUDGET)
    if level is not None:
        if rules.thinking_style != "gemini_level":
            raise InvalidRequest(NO_LEVELS)
        if str(level).lower() not in rules.thinking_accepts:
            raise InvalidRequest(UNSUPPORTED_LEVEL.format(level=str(level).upper()))
    if budget == 0 and not rules.can_disable_thinking:
        raise InvalidRequest(NO_ZERO_BUDGET)
