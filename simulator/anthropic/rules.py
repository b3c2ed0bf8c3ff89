"""What the Anthropic Messages API refuses of each model, as it refuses it: a retired id (404),
a thinking type, effort, sampling parameter, prefill or forced tool the model does not take (400).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from grove.simulator.model_rules import ModelRules, check_sampling, retired, rules_for
from grove.simulator.wire import InvalidRequest

# platform.claude.com/docs/en/build-with-claude/thinking-troubleshooting, "A 400 error says
# "thinking.type.enabled" is not supported" and "... "thinking.type.disabled" is not supported":
ADAPTIVE_ONLY = (
    '"thinking.type.{kind}" is not supported for this model. Use "thinking.type.adaptive" and '
    '"output_config.effort" to control thinking behavior.'
)
# Same page, "A 400 error says adaptive thinking is not supported":
NO_ADAPTIVE = "adaptive thinking is not supported on this model"
# platform.claude.com/docs/en/models/sonnet-5-5/migration-guide, "Turn off up-front thinking":
# "On Claude Sonnet 5.5, `disabled` returns a 400 `invalid_request_error`:"
USE_BETWEEN_TOOLS = (
    'To turn thinking off on this model, send "thinking": {"type": "between_tools"} instead of '
    '{"type": "disabled"}. The model does not think before responding. The short updates it '
    "writes between tool calls come back as thinking blocks."
)
# Same page: "`between_tools` [...] is accepted at `low`, `medium`, and `high` effort. At `xhigh`
# or `max`, it returns a 400 error. [...] `between_tools` takes no other field: `display`,
# `budget_tokens`, or `block_binding` sent with it returns a 400 error." The page gives neither
# message; these name the fields as the API's other validation messages do.
BETWEEN_TOOLS_EFFORTS = frozenset({"low", "medium", "high"})
BETWEEN_TOOLS_EFFORT = (
    '"thinking.type" value "between_tools" is not supported with "output_config.effort" value '
    '"{effort}" for this model'
)
BETWEEN_TOOLS_EXTRA = "thinking.between_tools.{field}: Extra inputs are not permitted"
# Same page, "Forced tool use is not supported" (also Claude Opus 5.5 and the Fable models):
NO_FORCED_TOOL = 'tool_choice: type "tool" and "any" are not supported for this model.'
# Same page, "Prefill returns an error": "The error reads:"
NO_PREFILL = (
    "This model does not support assistant message prefill. The conversation must end with a "
    "user message."
)
# Same page, "Sampling parameters return an error": "a non-default value returns a 400 error";
# the message is the API's own (as answered to `temperature` on Claude Opus 4.7 and later,
# quoted in UKGovernmentBEIS/inspect_ai#3721).
SAMPLING_DEPRECATED = "`{name}` is deprecated for this model."
# A retired id: 404 `not_found_error` naming the model (platform.claude.com/docs/en/api/errors,
# as answered for retired Claude models, e.g. "model: claude-sonnet-4-20250514").
ANTHROPIC_RETIRED = "model: {model}"


def check_anthropic(model: str, body: Mapping[str, Any]) -> None:
    """InvalidRequest for what the model refuses in a Messages body whose shape the wire module
    has checked; nothing for what it takes (or for a model the catalog does not know)."""
    if retired(model):
        raise InvalidRequest(ANTHROPIC_RETIRED.format(model=model), problem="model_not_found")
    rules = rules_for(model)
    if rules is not None:
        refuse_anthropic(rules, body)


def refuse_anthropic(rules: ModelRules, body: Mapping[str, Any]) -> None:
    """What `check_anthropic` refuses beyond a retired model, with the rules given."""
    thinking = body.get("thinking")
    if isinstance(thinking, dict):
        _check_thinking_type(rules, thinking, body.get("output_config"))
    if not rules.sampling_parameters:
        check_sampling(body, SAMPLING_DEPRECATED, problem="invalid_request")
    last = body["messages"][-1]  # the wire module has checked there is one, an object
    if last.get("role") == "assistant" and not rules.assistant_prefill:
        raise InvalidRequest(NO_PREFILL)
    choice = body.get("tool_choice")
    forced = isinstance(choice, dict) and choice.get("type") in ("tool", "any")
    if forced and not rules.forced_tool_choice:
        raise InvalidRequest(NO_FORCED_TOOL)


def _check_thinking_type(rules: ModelRules, thinking: Mapping[str, Any], config: object) -> None:
    kind = thinking.get("type")
    if not isinstance(kind, str):
        return  # the wire module's own validation answers a malformed `thinking`
    if kind in rules.thinking_refuses:
        if kind == "adaptive":
            raise InvalidRequest(NO_ADAPTIVE)
        if kind == "disabled" and "between_tools" in rules.thinking_accepts:
            raise InvalidRequest(USE_BETWEEN_TOOLS)
        raise InvalidRequest(ADAPTIVE_ONLY.format(kind=kind))
    if kind != "between_tools":
        return
    extra = sorted(set(thinking) - {"type"})
    if extra:
        raise InvalidRequest(BETWEEN_TOOLS_EXTRA.format(field=extra[0]))
    effort = config.get("effort") if isinstance(config, dict) else None
    if isinstance(effort, str) and effort not in BETWEEN_TOOLS_EFFORTS:
        raise InvalidRequest(BETWEEN_TOOLS_EFFORT.format(effort=effort))
