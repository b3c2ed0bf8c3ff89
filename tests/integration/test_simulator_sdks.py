"""The vendors' official SDKs as referees of the simulator: each streams text, thinking and a
tool call from it, reads its non-streamed answers, and raises its own typed errors for faults.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types as genai_types

from grove.simulator import SimulatorConfig, SimulatorThread
from grove.simulator.script import generated_words

KEY = "sim-sdk-test-key-51c0"
CLAUDE_MODEL = "claude-sonnet-4-6"
TOKENS = 12
WEATHER_ARGS = {"city": "Paris", "days": [1, 2], "units": "metric"}
TOOL_DIRECTIVE = f"[[sim tool=get_weather args='{json.dumps(WEATHER_ARGS)}']]"


@pytest.fixture(scope="module")
def simulator() -> Iterator[SimulatorThread]:
    with SimulatorThread(SimulatorConfig(api_key=KEY, tokens=TOKENS)) as running:
        yield running


def expected_text(prompt: str, tokens: int = TOKENS) -> str:
    return "".join(generated_words(prompt, tokens))


# --- Anthropic --------------------------------------------------------------------------------


def claude(simulator: SimulatorThread, key: str = KEY) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key=key, base_url=simulator.base_url, max_retries=0)


CLAUDE_TOOLS: list[Any] = [
    {"name": "get_weather", "description": "Weather.", "input_schema": {"type": "object"}}
]


def test_anthropic_streams_text(simulator: SimulatorThread) -> None:
    with claude(simulator).messages.stream(
        model=CLAUDE_MODEL,
        max_tokens=1024,
        messages=[{"role": "user", "content": "Name three rivers."}],
    ) as stream:
        deltas = list(stream.text_stream)
        message = stream.get_final_message()
    assert "".join(deltas) == expected_text("Name three rivers.")
    assert len(deltas) == TOKENS
    assert message.id.startswith("msg_01")
    assert message.stop_reason == "end_turn"
    assert [block.type for block in message.content] == ["text"]
    assert message.usage.output_tokens == TOKENS
    assert message.usage.input_tokens > 0


def test_anthropic_streams_thinking_with_signature(simulator: SimulatorThread) -> None:
    with claude(simulator).messages.stream(
        model=CLAUDE_MODEL,
        max_tokens=4096,
        thinking={"type": "enabled", "budget_tokens": 2048},
        messages=[{"role": "user", "content": '[[sim thinking="First, rivers." reply="Nile."]]'}],
    ) as stream:
        message = stream.get_final_message()
    thinking, text = message.content
    assert thinking.type == "thinking" and text.type == "text"
    assert thinking.thinking == "First, rivers."
    assert thinking.signature
    assert text.text == "Nile."
    assert message.usage.output_tokens == 3


def test_anthropic_streams_a_tool_call_then_answers_its_result(
    simulator: SimulatorThread,
) -> None:
    client = claude(simulator)
    messages: list[Any] = [{"role": "user", "content": f"Weather? {TOOL_DIRECTIVE}"}]
    with client.messages.stream(
        model=CLAUDE_MODEL, max_tokens=1024, tools=CLAUDE_TOOLS, messages=messages
    ) as stream:
        message = stream.get_final_message()
    assert message.stop_reason == "tool_use"
    (call,) = message.content
    assert call.type == "tool_use" and call.name == "get_weather"
    assert call.input == WEATHER_ARGS
    messages += [
        {"role": "assistant", "content": message.content},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "Sunny"}],
        },
    ]
    with client.messages.stream(
        model=CLAUDE_MODEL, max_tokens=1024, tools=CLAUDE_TOOLS, messages=messages
    ) as stream:
        answer = stream.get_final_message()
    assert answer.stop_reason == "end_turn"
    assert answer.content[0].type == "text"
    assert answer.content[0].text == expected_text("Sunny")


PRESERVING_MODEL = "claude-sonnet-5-5"


def preserved_tool_loop(
    client: anthropic.Anthropic, system: str = "Be brief."
) -> tuple[list[Any], Any]:
    """A tool call on a 5.5 model with thinking on, streamed, and its result: the messages to
    send next (the reply as the API returned it) and the streamed reply."""
    messages: list[Any] = [{"role": "user", "content": f"Weather? {TOOL_DIRECTIVE}"}]
    with client.messages.stream(
        model=PRESERVING_MODEL,
        max_tokens=4096,
        system=system,
        thinking={"type": "adaptive"},
        tools=CLAUDE_TOOLS,
        messages=messages,
    ) as stream:
        events = list(stream)
        message = stream.get_final_message()
    thinking, call = message.content
    assert call.type == "tool_use"
    messages += [
        {"role": "assistant", "content": [block.model_dump() for block in message.content]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "Sunny"}],
        },
    ]
    return messages, (events, thinking)


def test_anthropic_5_5_streams_thinking_without_text_and_a_signature_delta(
    simulator: SimulatorThread,
) -> None:
    """The default display leaves a 5.5 model's thinking text empty: no thinking delta, one
    signature_delta; the SDK reads the block with its signature all the same."""
    _, (events, thinking) = preserved_tool_loop(claude(simulator))
    deltas = [e.delta.type for e in events if e.type == "content_block_delta" and e.index == 0]
    assert deltas == ["signature_delta"]
    assert thinking.type == "thinking" and thinking.thinking == "" and thinking.signature
    with claude(simulator).messages.stream(
        model=PRESERVING_MODEL,
        max_tokens=4096,
        thinking={"type": "adaptive", "display": "summarized"},
        messages=[{"role": "user", "content": '[[sim thinking="Rivers first." reply="Nile."]]'}],
    ) as stream:
        shown = stream.get_final_message().content[0]
    assert shown.type == "thinking" and shown.thinking == "Rivers first." and shown.signature


def test_anthropic_5_5_thinking_goes_back_with_its_own_prefix_and_model_only(
    simulator: SimulatorThread,
) -> None:
    """Sent back as it came, the block is accepted; under another system prompt, with other
    tools or to another model it is refused with the API's text, and a tool loop without its
    leading thinking block is refused too."""
    client = claude(simulator)
    messages, _ = preserved_tool_loop(client)
    asked = {
        "model": PRESERVING_MODEL,
        "max_tokens": 4096,
        "system": "Be brief.",
        "thinking": {"type": "adaptive"},
        "tools": CLAUDE_TOOLS,
        "messages": messages,
    }
    answer = client.messages.create(**asked)  # type: ignore[call-overload]
    assert answer.content[-1].type == "text"
    changed: list[dict[str, Any]] = [
        {"system": "Be thorough."},
        {"tools": [*CLAUDE_TOOLS, {"name": "now", "input_schema": {"type": "object"}}]},
        {"model": "claude-opus-5-5"},
    ]
    for change in changed:
        with pytest.raises(anthropic.BadRequestError) as refused:
            client.messages.create(**{**asked, **change})
        message = refused.value.body["error"]["message"]  # type: ignore[index]
        assert message == (
            "messages.1.content.0: Invalid `signature` in `thinking` block. The block is bound "
            "to a different conversation. Remove the block, or set "
            '`thinking.block_binding.prefix_mismatch_behavior` to "drop_block".'
        )
    without_thinking = [messages[0], {**messages[1], "content": messages[1]["content"][1:]}]
    with pytest.raises(anthropic.BadRequestError) as refused:
        client.messages.create(  # type: ignore[call-overload]
            **{**asked, "messages": [*without_thinking, messages[2]]}
        )
    message = refused.value.body["error"]["message"]  # type: ignore[index]
    assert message.startswith(
        "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
        "`tool_use`. When `thinking` is enabled, a final `assistant` message must start with "
        "a thinking block"
    )


def test_anthropic_non_streamed_message(simulator: SimulatorThread) -> None:
    message = claude(simulator).messages.create(
        model=CLAUDE_MODEL,
        max_tokens=1024,
        messages=[{"role": "user", "content": "Plain question [[sim tokens=4]]"}],
    )
    assert message.content[0].type == "text"
    assert message.content[0].text == expected_text("Plain question", 4)
    assert message.usage.output_tokens == 4


@pytest.mark.parametrize(
    ("directive", "error_class"),
    [
        ("[[sim fault=429 retry_after=2]]", anthropic.RateLimitError),
        ("[[sim fault=529]]", anthropic.OverloadedError),
        ("[[sim fault=503]]", anthropic.InternalServerError),
        ("[[sim fault=500]]", anthropic.InternalServerError),
    ],
)
def test_anthropic_status_faults_raise_typed_errors(
    simulator: SimulatorThread, directive: str, error_class: type[Exception]
) -> None:
    with (
        pytest.raises(error_class) as caught,
        claude(simulator).messages.stream(
            model=CLAUDE_MODEL,
            max_tokens=1024,
            messages=[{"role": "user", "content": directive}],
        ) as stream,
    ):
        stream.get_final_message()
    error = caught.value
    assert isinstance(error, anthropic.APIStatusError)
    assert error.body["type"] == "error"  # type: ignore[index]
    if "429" in directive:
        assert error.response.headers["retry-after"] == "2"
        assert error.response.headers["retry-after-ms"] == "2000"
        assert error.body["error"]["type"] == "rate_limit_error"  # type: ignore[index]


def test_anthropic_wrong_key_and_error_after_200(simulator: SimulatorThread) -> None:
    with pytest.raises(anthropic.AuthenticationError) as caught:
        claude(simulator, key="wrong-key").messages.create(
            model=CLAUDE_MODEL, max_tokens=10, messages=[{"role": "user", "content": "x"}]
        )
    assert caught.value.body["error"]["type"] == "authentication_error"  # type: ignore[index]
    assert "wrong-key" not in str(caught.value) and KEY not in str(caught.value)
    with (
        pytest.raises(anthropic.APIStatusError) as in_stream,
        claude(simulator).messages.stream(
            model=CLAUDE_MODEL,
            max_tokens=1024,
            messages=[{"role": "user", "content": "[[sim fault=error_after_200]]"}],
        ) as stream,
    ):
        stream.get_final_message()
    assert in_stream.value.response.status_code == 200
    assert in_stream.value.body["error"]["type"] == "overloaded_error"  # type: ignore[index]


# --- OpenAI -----------------------------------------------------------------------------------


def gpt(simulator: SimulatorThread, key: str = KEY) -> openai.OpenAI:
    return openai.OpenAI(api_key=key, base_url=simulator.base_url + "/v1", max_retries=0)


RESPONSES_TOOLS: list[Any] = [
    {"type": "function", "name": "get_weather", "parameters": {"type": "object"}, "strict": False}
]
CHAT_TOOLS: list[Any] = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}
]


def test_openai_responses_streams_text(simulator: SimulatorThread) -> None:
    with gpt(simulator).responses.stream(model="gpt-5-mini", input="Name a river.") as stream:
        deltas = [event.delta for event in stream if event.type == "response.output_text.delta"]
        response = stream.get_final_response()
    assert "".join(deltas) == response.output_text == expected_text("Name a river.")
    assert len(deltas) == TOKENS
    assert response.id.startswith("resp_") and response.status == "completed"
    assert response.usage is not None and response.usage.output_tokens == TOKENS


def test_openai_responses_streams_reasoning_summary_and_encrypted_content(
    simulator: SimulatorThread,
) -> None:
    events = list(
        gpt(simulator).responses.create(
            model="gpt-5-mini",
            input=[{"role": "user", "content": '[[sim thinking="Rivers flow." reply="Nile."]]'}],
            reasoning={"effort": "low", "summary": "auto"},
            include=["reasoning.encrypted_content"],
            stream=True,
        )
    )
    numbers = [event.sequence_number for event in events]
    assert numbers == list(range(len(events)))
    summary = "".join(
        event.delta for event in events if event.type == "response.reasoning_summary_text.delta"
    )
    assert summary == "Rivers flow."
    final = events[-1]
    assert final.type == "response.completed"
    reasoning, message = final.response.output
    assert reasoning.type == "reasoning" and message.type == "message"
    assert reasoning.encrypted_content and reasoning.encrypted_content.startswith("gAAAAA")
    assert reasoning.summary[0].text == "Rivers flow."
    assert final.response.output_text == "Nile."
    usage = final.response.usage
    assert usage is not None and usage.output_tokens_details.reasoning_tokens == 2


def test_openai_responses_streams_a_function_call(simulator: SimulatorThread) -> None:
    with gpt(simulator).responses.stream(
        model="gpt-5-mini", input=f"Weather? {TOOL_DIRECTIVE}", tools=RESPONSES_TOOLS
    ) as stream:
        response = stream.get_final_response()
    (call,) = response.output
    assert call.type == "function_call" and call.name == "get_weather"
    assert json.loads(call.arguments) == WEATHER_ARGS
    assert call.call_id.startswith("call_")


def test_openai_responses_answers_function_output(simulator: SimulatorThread) -> None:
    response = gpt(simulator).responses.create(
        model="gpt-5-mini",
        input=[
            {"role": "user", "content": f"Weather? {TOOL_DIRECTIVE}"},
            {
                "type": "function_call",
                "call_id": "call_1",
                "name": "get_weather",
                "arguments": "{}",
            },
            {"type": "function_call_output", "call_id": "call_1", "output": "Rainy"},
        ],
        tools=RESPONSES_TOOLS,
    )
    assert response.output_text == expected_text("Rainy")


def test_openai_chat_streams_text_with_usage_chunk(simulator: SimulatorThread) -> None:
    chunks = list(
        gpt(simulator).chat.completions.create(
            model="gpt-5-mini",
            messages=[{"role": "user", "content": "Name a lake."}],
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == expected_text("Name a lake.")
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == "stop" and set(finishes[:-1]) == {None}
    usage_chunk = chunks[-1]
    assert usage_chunk.choices == [] and usage_chunk.usage is not None
    assert usage_chunk.usage.completion_tokens == TOKENS


def test_openai_chat_streams_a_tool_call_and_reasoning(simulator: SimulatorThread) -> None:
    with gpt(simulator).chat.completions.stream(
        model="gpt-5-mini",
        messages=[{"role": "user", "content": f"Weather? {TOOL_DIRECTIVE}"}],
        tools=CHAT_TOOLS,
        reasoning_effort="low",
    ) as stream:
        completion = stream.get_final_completion()
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls or []
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == WEATHER_ARGS


def test_openai_non_streamed_chat_and_responses(simulator: SimulatorThread) -> None:
    client = gpt(simulator)
    completion = client.chat.completions.create(
        model="gpt-5-mini", messages=[{"role": "user", "content": "Sea? [[sim tokens=3]]"}]
    )
    assert completion.choices[0].message.content == expected_text("Sea?", 3)
    assert completion.usage is not None and completion.usage.completion_tokens == 3
    response = client.responses.create(model="gpt-5-mini", input="Ocean? [[sim tokens=5]]")
    assert response.output_text == expected_text("Ocean?", 5)


@pytest.mark.parametrize(
    ("directive", "error_class", "status"),
    [
        ("[[sim fault=429 retry_after=1.5]]", openai.RateLimitError, 429),
        ("[[sim fault=500]]", openai.InternalServerError, 500),
        ("[[sim fault=503]]", openai.InternalServerError, 503),
        ("[[sim fault=529]]", openai.InternalServerError, 503),
    ],
)
@pytest.mark.parametrize("api", ["responses", "chat"])
def test_openai_status_faults_raise_typed_errors(
    simulator: SimulatorThread,
    directive: str,
    error_class: type[openai.APIStatusError],
    status: int,
    api: str,
) -> None:
    client = gpt(simulator)
    with pytest.raises(error_class) as caught:
        if api == "responses":
            client.responses.create(model="gpt-5-mini", input=directive, stream=True)
        else:
            client.chat.completions.create(
                model="gpt-5-mini", messages=[{"role": "user", "content": directive}], stream=True
            )
    assert caught.value.status_code == status
    if status == 429:
        assert caught.value.code == "rate_limit_exceeded"
        assert caught.value.response.headers["retry-after-ms"] == "1500"


def test_openai_auth_and_error_after_200(simulator: SimulatorThread) -> None:
    with pytest.raises(openai.AuthenticationError) as caught:
        gpt(simulator, key="wrong-key").responses.create(model="gpt-5-mini", input="x")
    assert caught.value.code == "invalid_api_key"
    assert "wrong-key" not in str(caught.value) and KEY not in str(caught.value)
    client = gpt(simulator)
    with pytest.raises(openai.APIError, match="server had an error"):
        list(
            client.responses.create(
                model="gpt-5-mini", input="[[sim fault=error_after_200]]", stream=True
            )
        )
    with pytest.raises(openai.APIError, match="server had an error"):
        list(
            client.chat.completions.create(
                model="gpt-5-mini",
                messages=[{"role": "user", "content": "[[sim fault=error_after_200]]"}],
                stream=True,
            )
        )


# --- Google -----------------------------------------------------------------------------------


def gemini(simulator: SimulatorThread, key: str = KEY) -> genai.Client:
    """A new client; callers keep it in a variable, since a dropped one closes its pool."""
    return genai.Client(
        api_key=key, http_options=genai_types.HttpOptions(base_url=simulator.base_url)
    )


GEMINI_TOOLS: list[Any] = [
    genai_types.Tool(
        function_declarations=[
            genai_types.FunctionDeclaration(name="get_weather", description="Weather.")
        ]
    )
]
# A model that still answers (gemini-2.5-flash is retired) and takes a thinking budget.
GEMINI_MODEL = "gemini-2.5-flash-lite"
THOUGHTS = genai_types.ThinkingConfig(include_thoughts=True, thinking_budget=1024)


def test_gemini_streams_text(simulator: SimulatorThread) -> None:
    client = gemini(simulator)
    chunks = list(
        client.models.generate_content_stream(model=GEMINI_MODEL, contents="Name a mountain.")
    )
    assert "".join(chunk.text or "" for chunk in chunks) == expected_text("Name a mountain.")
    last = chunks[-1]
    assert last.candidates and last.candidates[0].finish_reason == genai_types.FinishReason.STOP
    assert last.usage_metadata is not None
    assert last.usage_metadata.candidates_token_count == TOKENS


def test_gemini_streams_thoughts_with_a_signature(simulator: SimulatorThread) -> None:
    client = gemini(simulator)
    parts = [
        part
        for chunk in client.models.generate_content_stream(
            model=GEMINI_MODEL,
            contents='[[sim thinking="Peaks are tall." reply="Everest."]]',
            config=genai_types.GenerateContentConfig(thinking_config=THOUGHTS),
        )
        for candidate in chunk.candidates or []
        if candidate.content is not None
        for part in candidate.content.parts or []
    ]
    thoughts = "".join(part.text or "" for part in parts if part.thought)
    answer = "".join(part.text or "" for part in parts if not part.thought)
    assert thoughts == "Peaks are tall."
    assert answer == "Everest."
    assert any(part.thought_signature for part in parts if not part.thought)


def test_gemini_streams_a_function_call(simulator: SimulatorThread) -> None:
    client = gemini(simulator)
    calls = [
        call
        for chunk in client.models.generate_content_stream(
            model=GEMINI_MODEL,
            contents=f"Weather? {TOOL_DIRECTIVE}",
            config=genai_types.GenerateContentConfig(
                tools=GEMINI_TOOLS,
                automatic_function_calling=genai_types.AutomaticFunctionCallingConfig(disable=True),
            ),
        )
        for call in chunk.function_calls or []
    ]
    (call,) = calls
    assert call.name == "get_weather" and call.args == WEATHER_ARGS


def test_gemini_non_streamed_answer(simulator: SimulatorThread) -> None:
    client = gemini(simulator)
    response = client.models.generate_content(
        model=GEMINI_MODEL,
        contents="Hill? [[sim tokens=6]]",
        config=genai_types.GenerateContentConfig(thinking_config=THOUGHTS),
    )
    assert response.text == expected_text("Hill?", 6)
    assert response.usage_metadata is not None
    assert response.usage_metadata.thoughts_token_count == 6


@pytest.mark.parametrize(
    ("directive", "error_class", "status"),
    [
        ("[[sim fault=429 retry_after=3]]", genai_errors.ClientError, "RESOURCE_EXHAUSTED"),
        ("[[sim fault=500]]", genai_errors.ServerError, "INTERNAL"),
        ("[[sim fault=503]]", genai_errors.ServerError, "UNAVAILABLE"),
        ("[[sim fault=529]]", genai_errors.ServerError, "UNAVAILABLE"),
        ("[[sim fault=error_after_200]]", genai_errors.ServerError, "UNAVAILABLE"),
    ],
)
def test_gemini_faults_raise_typed_errors(
    simulator: SimulatorThread,
    directive: str,
    error_class: type[genai_errors.APIError],
    status: str,
) -> None:
    client = gemini(simulator)
    with pytest.raises(error_class) as caught:
        list(client.models.generate_content_stream(model=GEMINI_MODEL, contents=directive))
    assert caught.value.status == status
    if status == "RESOURCE_EXHAUSTED":
        assert caught.value.code == 429
        details = caught.value.details["error"]["details"]
        assert details == [
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "3s"}
        ]


def test_gemini_wrong_key_is_api_key_invalid(simulator: SimulatorThread) -> None:
    client = gemini(simulator, key="wrong-key")
    with pytest.raises(genai_errors.ClientError) as caught:
        client.models.generate_content(model=GEMINI_MODEL, contents="x")
    assert caught.value.code == 400 and caught.value.status == "INVALID_ARGUMENT"
    reasons = [detail.get("reason") for detail in caught.value.details["error"]["details"]]
    assert "API_KEY_INVALID" in reasons
    assert "wrong-key" not in str(caught.value) and KEY not in str(caught.value)
