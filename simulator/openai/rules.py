"""What OpenAI's Responses and Chat Completions APIs refuse of each model, as they refuse it: a
retired id (404), a reasoning effort or sampling parameter the model does not take (400).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from grove.simulator.model_rules import ModelRules, check_sampling, retired, rules_for
from grove.simulator.wire import InvalidRequest

# A retired id: 404 `model_not_found`, `param` null (as answered for a shut-down model, e.g.
# Wei-Shaw/sub2api#6895).
OPENAI_RETIRED = "The model `{model}` does not exist or you do not have access to it."
# An effort the model does not take: 400 `unsupported_value` (developers.openai.com/api/docs/
# guides/reasoning lists each model's efforts; the message as answered for "none", e.g.
# "Unsupported value: 'reasoning.effort' does not support 'none' with this model. Supported
# values are: 'minimal', 'low', 'medium', and 'high'.").
UNSUPPORTED_EFFORT = (
    "Unsupported value: '{param}' does not support '{effort}' with this model. Supported values "
    "are: {supported}."
)
# A sampling parameter on a reasoning model: 400 `unsupported_parameter` (as answered to
# `temperature` on gpt-5, e.g. OpenHands/software-agent-sdk#992).
UNSUPPORTED_SAMPLING = "Unsupported parameter: '{name}' is not supported with this model."


def check_openai(model: str, body: Mapping[str, Any], effort_param: str) -> None:
    """InvalidRequest for what the model refuses in a Responses or Chat Completions body;
    `effort_param` names the effort's field on that wire (`reasoning.effort`,
    `reasoning_effort`)."""
    if retired(model):
        raise InvalidRequest(OPENAI_RETIRED.format(model=model), problem="model_not_found")
    rules = rules_for(model)
    if rules is not None:
        refuse_openai(rules, body, effort_param)


def refuse_openai(rules: ModelRules, body: Mapping[str, Any], effort_param: str) -> None:
    """What `check_openai` refuses beyond a retired model, with the rules given."""
    reasoning = body.get("reasoning")
    effort = (
        reasoning.get("effort") if isinstance(reasoning, dict) else body.get("reasoning_effort")
    )
    if isinstance(effort, str) and effort not in rules.effort_levels:
        supported = _openai_listing(rules.effort_levels)
        raise InvalidRequest(
            UNSUPPORTED_EFFORT.format(param=effort_param, effort=effort, supported=supported),
            param=effort_param,
            problem="unsupported_value",
        )
    if not rules.sampling_parameters:
        check_sampling(body, UNSUPPORTED_SAMPLING, problem="unsupported_parameter")


def _openai_listing(values: tuple[str, ...]) -> str:
    """'a', 'b', and 'c' (OpenAI's way of listing accepted values)."""
    quoted = [f"'{value}'" for value in values]
    if len(quoted) <= 2:
        return " and ".join(quoted)
    return ", ".join(quoted[:-1]) + f", and {quoted[-1]}"
