"""The vendors' official SDKs as referees of the simulator's per-model rules: what a model
refuses comes back as the SDK's own error class, with the vendor's type and message; what it
takes is answered.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types as genai_types

from grove.providers.lifecycle import TODAY_ENV
from grove.simulator import SimulatorConfig, SimulatorThread
from grove.simulator.anthropic.rules import (
    ADAPTIVE_ONLY,
    NO_ADAPTIVE,
    NO_FORCED_TOOL,
    NO_PREFILL,
    USE_BETWEEN_TOOLS,
)
from grove.simulator.google.rules import LEVEL_AND_BUDGET, NO_LEVELS

KEY = "sim-sdk-refusals-key-8b2e"
QUESTION: list[Any] = [{"role": "user", "content": "Where is the Louvre?"}]
TOOLS: list[Any] = [{"name": "lookup", "description": "Look.", "input_schema": {"type": "object"}}]


@pytest.fixture(scope="module")
def simulator() -> Iterator[SimulatorThread]:
    with SimulatorThread(SimulatorConfig(api_key=KEY, tokens=3)) as running:
        yield running


# --- Anthropic --------------------------------------------------------------------------------


def claude(simulator: SimulatorThread) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key=KEY, base_url=simulator.base_url, max_retries=0)


def test_anthropic_retired_model_is_not_found(simulator: SimulatorThread) -> None:
    with pytest.raises(anthropic.NotFoundError) as caught:
        claude(simulator).messages.create(
            model="claude-sonnet-4-5", max_tokens=64, messages=QUESTION
        )
    assert caught.value.status_code == 404
    assert caught.value.body["error"] == {  # type: ignore[index]
        "type": "not_found_error",
        "message": "model: claude-sonnet-4-5",
    }


REFUSED: list[tuple[str, dict[str, Any], str]] = [
    ("claude-sonnet-5-5", {"thinking": {"type": "disabled"}}, USE_BETWEEN_TOOLS),
    ("claude-opus-5-5", {"thinking": {"type": "disabled"}}, ADAPTIVE_ONLY.format(kind="disabled")),
    ("claude-fable-5-2", {"thinking": {"type": "disabled"}}, ADAPTIVE_ONLY.format(kind="disabled")),
    (
        "claude-sonnet-5-5",
        {"thinking": {"type": "enabled", "budget_tokens": 2048}},
        ADAPTIVE_ONLY.format(kind="enabled"),
    ),
    ("claude-haiku-4-5", {"thinking": {"type": "adaptive"}}, NO_ADAPTIVE),
    (
        "claude-opus-5-5",
        {"thinking": {"type": "between_tools"}},
        ADAPTIVE_ONLY.format(kind="between_tools"),
    ),
    (
        "claude-sonnet-5-5",
        {"thinking": {"type": "between_tools"}, "output_config": {"effort": "max"}},
        '"thinking.type" value "between_tools" is not supported with "output_config.effort" '
        'value "max" for this model',
    ),
    (
        "claude-sonnet-5-5",
        {"thinking": {"type": "between_tools", "display": "summarized"}},
        "thinking.between_tools.display: Extra inputs are not permitted",
    ),
    (
        "claude-sonnet-5-5",
        {"extra_body": {"temperature": 0.2}},
        "`temperature` is deprecated for this model.",
    ),
    ("claude-opus-5-5", {"extra_body": {"top_p": 0.9}}, "`top_p` is deprecated for this model."),
    ("claude-haiku-5-5", {"extra_body": {"top_k": 5}}, "`top_k` is deprecated for this model."),
    (
        "claude-sonnet-5-5",
        {"messages": [*QUESTION, {"role": "assistant", "content": "It is in"}]},
        NO_PREFILL,
    ),
    ("claude-opus-5-5", {"tools": TOOLS, "tool_choice": {"type": "any"}}, NO_FORCED_TOOL),
    (
        "claude-sonnet-5-5",
        {"tools": TOOLS, "tool_choice": {"type": "tool", "name": "lookup"}},
        NO_FORCED_TOOL,
    ),
]


@pytest.mark.parametrize(("model", "settings", "message"), REFUSED)
def test_anthropic_refused_settings_are_bad_requests_with_the_api_text(
    simulator: SimulatorThread, model: str, settings: dict[str, Any], message: str
) -> None:
    asked: dict[str, Any] = {"model": model, "max_tokens": 4096, "messages": QUESTION}
    with pytest.raises(anthropic.BadRequestError) as caught:
        claude(simulator).messages.create(**{**asked, **settings})
    assert caught.value.status_code == 400
    error = caught.value.body["error"]  # type: ignore[index]
    assert error == {"type": "invalid_request_error", "message": message}


TAKEN: list[tuple[str, dict[str, Any]]] = [
    ("claude-sonnet-5-5", {"thinking": {"type": "between_tools"}}),
    (
        "claude-sonnet-5-5",
        {"thinking": {"type": "between_tools"}, "output_config": {"effort": "high"}},
    ),
    ("claude-sonnet-5-5", {"thinking": {"type": "adaptive"}, "output_config": {"effort": "max"}}),
    ("claude-haiku-5-5", {"thinking": {"type": "disabled"}}),
    ("claude-sonnet-5-5", {"extra_body": {"temperature": 1.0}}),  # the default
    ("claude-haiku-4-5", {"thinking": {"type": "enabled", "budget_tokens": 2048}}),
    ("claude-haiku-4-5", {"extra_body": {"temperature": 0.2, "top_k": 5}}),
    ("claude-haiku-4-5", {"messages": [*QUESTION, {"role": "assistant", "content": "It is in"}]}),
    ("claude-haiku-4-5", {"tools": TOOLS, "tool_choice": {"type": "any"}}),
    ("claude-sonnet-5-5", {"tools": TOOLS, "tool_choice": {"type": "auto"}}),
]


@pytest.mark.parametrize(("model", "settings"), TAKEN)
def test_anthropic_settings_a_model_takes_are_answered(
    simulator: SimulatorThread, model: str, settings: dict[str, Any]
) -> None:
    asked: dict[str, Any] = {"model": model, "max_tokens": 4096, "messages": QUESTION}
    message = claude(simulator).messages.create(**{**asked, **settings})
    assert message.stop_reason in ("end_turn", "tool_use")


# --- OpenAI -----------------------------------------------------------------------------------


def gpt(simulator: SimulatorThread) -> openai.OpenAI:
    return openai.OpenAI(api_key=KEY, base_url=f"{simulator.base_url}/v1", max_retries=0)


def test_openai_effort_none_is_refused_where_the_model_does_not_take_it(
    simulator: SimulatorThread,
) -> None:
    client = gpt(simulator)
    supported = "Supported values are: 'low', 'medium', 'high', 'xhigh', and 'max'."
    refusal = "Unsupported value: 'reasoning.effort' does not support 'none' with this model."
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="gpt-6.1-sol", input="Hi", reasoning={"effort": "none"})
    assert caught.value.code == "unsupported_value"
    assert caught.value.param == "reasoning.effort"
    assert caught.value.body["message"] == (  # type: ignore[index]
        f"{refusal} {supported}"
    )
    with pytest.raises(openai.BadRequestError) as in_chat:
        client.chat.completions.create(
            model="gpt-6.2-sol",
            messages=[{"role": "user", "content": "Hi"}],
            reasoning_effort="none",
        )
    assert in_chat.value.code == "unsupported_value"
    assert in_chat.value.param == "reasoning_effort"
    assert "'reasoning_effort' does not support 'none'" in str(in_chat.value)
    answered = client.responses.create(
        model="gpt-6.1-terra", input="Hi", reasoning={"effort": "none"}
    )
    assert answered.status == "completed"
    with pytest.raises(openai.BadRequestError, match="does not support 'minimal'"):
        client.responses.create(model="gpt-6.1-terra", input="Hi", reasoning={"effort": "minimal"})


def test_openai_model_past_its_shutdown_is_not_found(
    simulator: SimulatorThread, monkeypatch: pytest.MonkeyPatch
) -> None:
    """gpt-5-mini is deprecated on the catalog's day and shut down from 2026-12-11 on."""
    client = gpt(simulator)
    assert client.responses.create(model="gpt-5-mini", input="Hi").output_text
    monkeypatch.setenv(TODAY_ENV, "2026-12-12")
    with pytest.raises(openai.NotFoundError) as caught:
        client.responses.create(model="gpt-5-mini", input="Hi")
    assert (caught.value.code, caught.value.param) == ("model_not_found", None)
    assert caught.value.body["message"] == (  # type: ignore[index]
        "The model `gpt-5-mini` does not exist or you do not have access to it."
    )
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(
            model="gpt-5-nano", messages=[{"role": "user", "content": "Hi"}]
        )


def test_openai_sampling_parameters_are_refused_on_reasoning_models(
    simulator: SimulatorThread,
) -> None:
    client = gpt(simulator)
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="gpt-6-sol", input="Hi", temperature=0.2)
    assert caught.value.code == "unsupported_parameter"
    assert caught.value.param == "temperature"
    assert caught.value.body["message"] == (  # type: ignore[index]
        "Unsupported parameter: 'temperature' is not supported with this model."
    )
    with pytest.raises(openai.BadRequestError, match="'top_p' is not supported"):
        client.chat.completions.create(
            model="gpt-6-luna", messages=[{"role": "user", "content": "Hi"}], top_p=0.5
        )
    assert client.responses.create(model="gpt-6-sol", input="Hi", temperature=1).output_text


# --- Google -----------------------------------------------------------------------------------


def test_gemini_retired_model_is_not_found(simulator: SimulatorThread) -> None:
    client = genai.Client(
        api_key=KEY, http_options=genai_types.HttpOptions(base_url=simulator.base_url)
    )
    with pytest.raises(genai_errors.ClientError) as caught:
        client.models.generate_content(model="gemini-2.5-pro", contents="Hi")
    assert caught.value.code == 404
    assert caught.value.status == "NOT_FOUND"
    assert caught.value.message == (
        "models/gemini-2.5-pro is not found for API version v1, or is not supported for "
        "generateContent. Call ListModels to see the list of available models and their "
        "supported methods."
    )


GEMINI_REFUSED: list[tuple[str, genai_types.ThinkingConfig, str]] = [
    (
        "gemini-3.8-flash",
        genai_types.ThinkingConfig(thinking_level=genai_types.ThinkingLevel.MINIMAL),
        "Thinking level MINIMAL is not supported for this model. Please retry with other "
        "thinking level.",
    ),
    (
        "gemini-4-argon",
        genai_types.ThinkingConfig(thinking_level=genai_types.ThinkingLevel.MINIMAL),
        "Thinking level MINIMAL is not supported for this model. Please retry with other "
        "thinking level.",
    ),
    (
        "gemini-2.5-flash-lite",
        genai_types.ThinkingConfig(thinking_level=genai_types.ThinkingLevel.LOW),
        NO_LEVELS,
    ),
    (
        "gemini-3.5-flash",
        genai_types.ThinkingConfig(
            thinking_level=genai_types.ThinkingLevel.LOW, thinking_budget=1024
        ),
        LEVEL_AND_BUDGET,
    ),
]


@pytest.mark.parametrize(("model", "thinking", "message"), GEMINI_REFUSED)
def test_gemini_refused_thinking_is_a_client_error_with_the_api_text(
    simulator: SimulatorThread, model: str, thinking: genai_types.ThinkingConfig, message: str
) -> None:
    client = genai.Client(
        api_key=KEY, http_options=genai_types.HttpOptions(base_url=simulator.base_url)
    )
    config = genai_types.GenerateContentConfig(thinking_config=thinking)
    with pytest.raises(genai_errors.ClientError) as caught:
        client.models.generate_content(model=model, contents="Hi", config=config)
    assert caught.value.code == 400
    assert caught.value.status == "INVALID_ARGUMENT"
    assert caught.value.message == message
    answered = client.models.generate_content(
        model="gemini-3.5-flash",
        contents="Hi",
        config=genai_types.GenerateContentConfig(
            thinking_config=genai_types.ThinkingConfig(
                thinking_level=genai_types.ThinkingLevel.MINIMAL
            )
        ),
    )
    assert answered.text
