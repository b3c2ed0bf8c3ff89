"""The settings each model refuses, as the vendors' APIs refuse them: a retired id (404), and a
refused thinking setting, budget, effort, sampling parameter, prefill or forced tool (400).

Which model refuses what is the catalog's (`ModelRules`, which `ModelInfo` is), and whether it
is retired the lifecycle's verdict for today (providers/lifecycle.py, as Grove's own); the error
texts are the vendors' own, each quoted from the page named beside it. Each wire module calls
its check once a body is read.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from datetime import date
from functools import lru_cache
from typing import Any, Protocol

from grove.providers.catalog import model_info
from grove.providers.errors import ClockError, GroveError
from grove.providers.lifecycle import TODAY_ENV, standing_of, today
from grove.simulator.wire import InvalidRequest, Problem


class ModelRules(Protocol):
    """What the checks read of a model (`providers.catalog.ModelInfo` is one)."""

    @property
    def thinking_style(self) -> str: ...
    @property
    def thinking_accepts(self) -> tuple[str, ...]: ...
    @property
    def thinking_refuses(self) -> tuple[str, ...]: ...
    @property
    def effort_levels(self) -> tuple[str, ...]: ...
    @property
    def forced_tool_choice(self) -> bool: ...
    @property
    def sampling_parameters(self) -> bool: ...
    @property
    def assistant_prefill(self) -> bool: ...
    @property
    def can_disable_thinking(self) -> bool: ...


@lru_cache(maxsize=4096)
def rules_for(model: str) -> ModelRules | None:
    """The rules of a model the catalog knows, looked up once per id; None for any other id (a
    new model or a compatible server's own: the simulator has nothing to hold it to)."""
    try:
        info = model_info(model)
    except GroveError:
        return None
    return info if info.known else None


def retired(model: str) -> bool:
    """Whether the vendor no longer serves `model` today (`GROVE_TODAY`, as for Grove's own
    verdicts): a catalog model, or a dated snapshot of one, past its shutdown."""
    return _retired_on(model, _day(os.environ.get(TODAY_ENV), int(time.monotonic())))


@lru_cache(maxsize=8)
def _day(given: str | None, second: int) -> date:
    """Today, read again each second (or when `GROVE_TODAY` changes), not at every request."""
    try:
        return today()
    except ClockError:
        return date.today()


@lru_cache(maxsize=4096)
def _retired_on(model: str, day: date) -> bool:
    try:
        info = model_info(model)
    except GroveError:
        return False
    return standing_of(info, day, model).retired


# --- Anthropic --------------------------------------------------------------------------------
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
# The values a request may leave at their defaults (the API's defaults: temperature 1, top_p 1;
# top_k has none).
SAMPLING_DEFAULTS: Mapping[str, float | None] = {"temperature": 1.0, "top_p": 1.0, "top_k": None}
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
        _check_sampling(body, SAMPLING_DEPRECATED, problem="invalid_request")
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


def _check_sampling(body: Mapping[str, Any], text: str, *, problem: Problem) -> None:
    for name, default in SAMPLING_DEFAULTS.items():
        value = body.get(name)
        if value is not None and value != default:
            raise InvalidRequest(text.format(name=name), param=name, problem=problem)


# --- OpenAI -----------------------------------------------------------------------------------
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
        _check_sampling(body, UNSUPPORTED_SAMPLING, problem="unsupported_parameter")


def _openai_listing(values: tuple[str, ...]) -> str:
    """'a', 'b', and 'c' (OpenAI's way of listing accepted values)."""
    quoted = [f"'{value}'" for value in values]
    if len(quoted) <= 2:
        return " and ".join(quoted)
    return ", ".join(quoted[:-1]) + f", and {quoted[-1]}"


# --- Gemini -----------------------------------------------------------------------------------
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
