"""The simulator's per-model rules as pure functions: the vendors' texts for each refusal, and
for any model id with a known prefix at any thinking level, the bodies Grove's request
builders make pass the rules of the model the catalog takes that id for.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grove.providers.anthropic.request import request_body as anthropic_body
from grove.providers.base import (
    THINKING_LEVELS,
    Message,
    OutputSchema,
    Request,
    TextPart,
    ThinkingLevel,
)
from grove.providers.catalog import MODELS, PROVIDER_PREFIXES, model_info
from grove.providers.google.request import build_body as google_body
from grove.providers.lifecycle import TODAY_ENV
from grove.providers.openai.chat import request_body as chat_body
from grove.providers.openai.responses import request_body as responses_body
from grove.simulator import model_rules
from grove.simulator.anthropic.rules import (
    ADAPTIVE_ONLY,
    NO_ADAPTIVE,
    NO_FORCED_TOOL,
    NO_PREFILL,
    USE_BETWEEN_TOOLS,
    check_anthropic,
    refuse_anthropic,
)
from grove.simulator.google.rules import check_gemini, refuse_gemini
from grove.simulator.model_rules import rules_for
from grove.simulator.openai.rules import check_openai, refuse_openai
from grove.simulator.wire import InvalidRequest

QUESTION: list[dict[str, Any]] = [{"role": "user", "content": "Hi"}]


def refusal(model: str, **body: Any) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as caught:
        check_anthropic(model, {"messages": QUESTION, **body})
    return caught.value


def test_anthropic_thinking_types_a_model_refuses() -> None:
    assert refusal("claude-sonnet-5-5", thinking={"type": "disabled"}).message == USE_BETWEEN_TOOLS
    disabled = ADAPTIVE_ONLY.format(kind="disabled")
    assert refusal("claude-opus-5-5", thinking={"type": "disabled"}).message == disabled
    assert disabled == (
        '"thinking.type.disabled" is not supported for this model. Use "thinking.type.adaptive" '
        'and "output_config.effort" to control thinking behavior.'
    )
    budget = {"type": "enabled", "budget_tokens": 2048}
    enabled = refusal("claude-haiku-5-5", thinking=budget).message
    assert enabled == ADAPTIVE_ONLY.format(kind="enabled")
    assert refusal("claude-sonnet-4-6", thinking={"type": "between_tools"}).problem == (
        "invalid_request"
    )
    assert refusal("claude-haiku-4-5", thinking={"type": "adaptive"}).message == NO_ADAPTIVE
    for taken in ({"type": "adaptive"}, {"type": "between_tools"}):
        check_anthropic("claude-sonnet-5-5", {"messages": QUESTION, "thinking": taken})
    check_anthropic("claude-sonnet-4-6", {"messages": QUESTION, "thinking": budget})


def test_between_tools_takes_no_other_field_and_no_effort_above_high() -> None:
    between = {"type": "between_tools"}
    for effort in ("low", "medium", "high"):
        body = {"messages": QUESTION, "thinking": between, "output_config": {"effort": effort}}
        check_anthropic("claude-sonnet-5-5", body)
    for effort in ("xhigh", "max"):
        refused = refusal("claude-sonnet-5-5", thinking=between, output_config={"effort": effort})
        assert f'"output_config.effort" value "{effort}"' in refused.message
    shown = refusal("claude-sonnet-5-5", thinking={**between, "display": "summarized"})
    assert shown.message == "thinking.between_tools.display: Extra inputs are not permitted"


@pytest.mark.parametrize("name", ["temperature", "top_p", "top_k"])
def test_sampling_parameters_off_their_defaults_are_refused_where_the_model_refuses_them(
    name: str,
) -> None:
    assert refusal("claude-opus-5-5", **{name: 0.5}).message == (
        f"`{name}` is deprecated for this model."
    )
    check_anthropic("claude-haiku-4-5", {"messages": QUESTION, name: 0.5})
    with pytest.raises(InvalidRequest) as caught:
        check_openai("gpt-6-sol", {name: 0.5}, "reasoning.effort")
    assert caught.value.problem == "unsupported_parameter" and caught.value.param == name
    assert caught.value.message == (
        f"Unsupported parameter: '{name}' is not supported with this model."
    )
    check_gemini("gemini-3.8-flash", "v1beta", {})  # Gemini takes them


def test_the_defaults_of_sampling_parameters_are_taken() -> None:
    check_anthropic("claude-opus-5-5", {"messages": QUESTION, "temperature": 1})
    check_openai("gpt-6-sol", {"temperature": 1, "top_p": 1.0}, "reasoning.effort")


def test_prefill_and_forced_tool_choice_where_the_model_refuses_them() -> None:
    prefilled = [*QUESTION, {"role": "assistant", "content": "Hello"}]
    assert refusal("claude-fable-5-2", messages=prefilled).message == NO_PREFILL
    check_anthropic("claude-haiku-4-5", {"messages": prefilled})
    for choice in ({"type": "any"}, {"type": "tool", "name": "t"}):
        assert refusal("claude-opus-5-5", tool_choice=choice).message == NO_FORCED_TOOL
        check_anthropic("claude-opus-4-8", {"messages": QUESTION, "tool_choice": choice})
    check_anthropic("claude-opus-5-5", {"messages": QUESTION, "tool_choice": {"type": "auto"}})


def test_a_retired_model_is_not_found_on_every_wire(monkeypatch: pytest.MonkeyPatch) -> None:
    anthropic = refusal("claude-sonnet-4-5")
    assert (anthropic.problem, anthropic.message) == ("model_not_found", "model: claude-sonnet-4-5")
    snapshot = refusal("claude-sonnet-4-5-20250929")  # a dated snapshot shares its lifecycle
    assert snapshot.message == "model: claude-sonnet-4-5-20250929"
    check_openai("gpt-5", {}, "reasoning.effort")  # deprecated: it still answers
    monkeypatch.setenv(TODAY_ENV, "2026-12-12")  # the day after its shutdown
    with pytest.raises(InvalidRequest) as openai:
        check_openai("gpt-5", {}, "reasoning.effort")
    assert openai.value.problem == "model_not_found"
    assert (
        openai.value.message == "The model `gpt-5` does not exist or you do not have access to it."
    )
    with pytest.raises(InvalidRequest) as gemini:
        check_gemini("gemini-2.5-pro", "v1beta", None)
    assert gemini.value.problem == "model_not_found"
    assert gemini.value.message.startswith(
        "models/gemini-2.5-pro is not found for API version v1beta, or is not supported for "
        "generateContent."
    )


def test_openai_efforts_a_model_does_not_take() -> None:
    with pytest.raises(InvalidRequest) as caught:
        check_openai("gpt-6.1-sol", {"reasoning": {"effort": "none"}}, "reasoning.effort")
    assert caught.value.problem == "unsupported_value"
    assert caught.value.message == (
        "Unsupported value: 'reasoning.effort' does not support 'none' with this model. "
        "Supported values are: 'low', 'medium', 'high', 'xhigh', and 'max'."
    )
    with pytest.raises(InvalidRequest, match="'reasoning_effort' does not support 'minimal'"):
        check_openai("gpt-5.1", {"reasoning_effort": "minimal"}, "reasoning_effort")
    check_openai("gpt-6.1-terra", {"reasoning": {"effort": "none"}}, "reasoning.effort")


def test_gemini_thinking_a_model_does_not_take() -> None:
    with pytest.raises(InvalidRequest, match=r"^Thinking level MINIMAL is not supported"):
        check_gemini("gemini-3.8-flash", "v1beta", {"thinkingLevel": "minimal"})
    check_gemini("gemini-3.5-flash", "v1beta", {"thinkingLevel": "MINIMAL"})
    with pytest.raises(InvalidRequest, match=r"^Thinking level is not supported"):
        check_gemini("gemini-2.5-flash-lite", "v1beta", {"thinkingLevel": "low"})
    with pytest.raises(InvalidRequest, match=r"^You can only set only one"):
        check_gemini("gemini-3.5-flash", "v1beta", {"thinkingLevel": "low", "thinkingBudget": 1})
    with pytest.raises(InvalidRequest, match=r"^Budget 0 is invalid"):  # a retired one's rules
        refuse_gemini(MODELS["gemini-2.5-pro"], {"thinkingBudget": 0})
    check_gemini("gemini-2.5-flash-lite", "v1beta", {"thinkingBudget": 0})


def test_rules_are_the_catalogs_for_known_ids_only() -> None:
    assert rules_for("claude-sonnet-5-5") is MODELS["claude-sonnet-5-5"]
    assert rules_for("claude-sonnet-9-9") is None
    assert rules_for("my-local-model") is None
    check_anthropic("claude-sonnet-9-9", {"messages": QUESTION, "temperature": 0})


# --- any id, any level: the builders send what the rules accept ------------------------------

ANSWER = OutputSchema(
    name="answer",
    schema={"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
)
PREFIXES = [prefix for prefix, _ in PROVIDER_PREFIXES]
WORDS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789.-", min_size=0, max_size=16)


@settings(max_examples=300, deadline=None)
@given(
    model=st.one_of(
        st.sampled_from(sorted(MODELS)),
        st.builds(lambda prefix, rest: prefix + rest, st.sampled_from(PREFIXES), WORDS),
        st.builds(lambda known, rest: known + rest, st.sampled_from(sorted(MODELS)), WORDS),
    ),
    level=st.sampled_from((None, *THINKING_LEVELS)),
    typed=st.booleans(),
    going_on=st.booleans(),
)
def test_any_model_id_at_any_level_gets_a_request_its_rules_accept(
    model: str, level: ThinkingLevel | None, typed: bool, going_on: bool
) -> None:
    info = model_info(model)
    if model_rules.retired(model):
        return  # no request is accepted: Grove refuses these before it sends anything
    messages: tuple[Message, ...] = (Message.user("Where is the Louvre?"),)
    if going_on:
        reply = Message(role="assistant", parts=(TextPart(text="Paris."),))
        messages += (reply, Message.user("Sure?"))
    request = Request(
        model=model, messages=messages, thinking=level, output=ANSWER if typed else None
    )
    if info.provider == "anthropic":
        refuse_anthropic(info, anthropic_body(request)[0])
    elif info.provider == "openai":
        refuse_openai(info, responses_body(request), "reasoning.effort")
        refuse_openai(info, chat_body(request), "reasoning_effort")
    else:
        config = google_body(request)[0].get("generationConfig", {}).get("thinkingConfig")
        refuse_gemini(info, config)
