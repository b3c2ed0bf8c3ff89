"""The vendors' SDKs as referees of parallel tool calls and scripted steps: each accumulates
three `fork` calls from one streamed reply, sends its own messages back with the results, gets
the step-2 `wait` call, and then a text answer."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest
from google import genai
from google.genai import types as genai_types

from grove.simulator import SimulatorConfig, SimulatorThread
from grove.simulator.script import generated_words

KEY = "sim-sdk-calls-key-9d21"
TOKENS = 5
FAN_OUT = (
    """[[sim calls='[{"name":"fork","args":{"prompt":"a"}},{"name":"fork","args":{"prompt":"b"}},"""
    """{"name":"fork","args":{"prompt":"c"}}]']] [[sim step=2 tool=wait args='{"timeout":5}']]"""
)
SCRIPT = f"Split this three ways. {FAN_OUT}"
FORKS = [("fork", {"prompt": prompt}) for prompt in "abc"]
WAIT = [("wait", {"timeout": 5})]
FORK_RESULTS = ["child a: done", "child b: done", "child c: done"]
WAIT_RESULT = "all three finished"
ANSWER = "".join(generated_words(WAIT_RESULT, TOKENS))
TOOL_NAMES = ("fork", "wait")


@pytest.fixture(scope="module")
def simulator() -> Iterator[SimulatorThread]:
    with SimulatorThread(SimulatorConfig(api_key=KEY, tokens=TOKENS)) as running:
        yield running


def test_anthropic_accumulates_parallel_tool_uses(simulator: SimulatorThread) -> None:
    client = anthropic.Anthropic(api_key=KEY, base_url=simulator.base_url, max_retries=0)
    tools: list[Any] = [
        {"name": name, "description": name, "input_schema": {"type": "object"}}
        for name in TOOL_NAMES
    ]
    messages: list[Any] = [{"role": "user", "content": SCRIPT}]

    def step(results: list[str] | None) -> anthropic.types.Message:
        with client.messages.stream(
            model="claude-sonnet-4-6", max_tokens=1024, tools=tools, messages=messages
        ) as stream:
            message = stream.get_final_message()
        uses = [block for block in message.content if block.type == "tool_use"]
        messages.append({"role": "assistant", "content": message.content})
        if results is not None:
            messages.append(
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": use.id, "content": result}
                        for use, result in zip(uses, results, strict=True)
                    ],
                }
            )
        return message

    forks = step(FORK_RESULTS)
    assert forks.stop_reason == "tool_use"
    assert [(block.type, block.name, block.input) for block in forks.content] == [  # type: ignore[union-attr]
        ("tool_use", name, args) for name, args in FORKS
    ]
    assert len({block.id for block in forks.content}) == 3  # type: ignore[union-attr]
    wait = step([WAIT_RESULT])
    assert [(block.name, block.input) for block in wait.content] == WAIT  # type: ignore[union-attr]
    answer = step(None)
    assert answer.stop_reason == "end_turn"
    assert [block.type for block in answer.content] == ["text"]
    assert answer.content[0].text == ANSWER  # type: ignore[union-attr]


def gpt(simulator: SimulatorThread) -> openai.OpenAI:
    return openai.OpenAI(api_key=KEY, base_url=simulator.base_url + "/v1", max_retries=0)


def test_openai_responses_accumulates_parallel_function_calls(
    simulator: SimulatorThread,
) -> None:
    client = gpt(simulator)
    tools: list[Any] = [
        {"type": "function", "name": name, "parameters": {"type": "object"}, "strict": False}
        for name in TOOL_NAMES
    ]
    given: list[Any] = [{"role": "user", "content": SCRIPT}]

    def step(results: list[str] | None) -> Any:
        with client.responses.stream(model="gpt-5-mini", input=given, tools=tools) as stream:
            response = stream.get_final_response()
        calls = [item for item in response.output if item.type == "function_call"]
        given.extend(response.output)
        for call, result in zip(calls, results or [], strict=True):
            given.append(
                {"type": "function_call_output", "call_id": call.call_id, "output": result}
            )
        return response

    forks = step(FORK_RESULTS)
    named = [(item.type, item.name, json.loads(item.arguments)) for item in forks.output]
    assert named == [("function_call", name, args) for name, args in FORKS]
    assert len({item.call_id for item in forks.output}) == 3
    wait = step([WAIT_RESULT])
    assert [(item.name, json.loads(item.arguments)) for item in wait.output] == WAIT
    answer = step(None)
    assert answer.output_text == ANSWER
    assert [item.type for item in answer.output] == ["message"]


def test_openai_chat_accumulates_parallel_tool_calls(simulator: SimulatorThread) -> None:
    client = gpt(simulator)
    tools: list[Any] = [
        {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
        for name in TOOL_NAMES
    ]
    messages: list[Any] = [{"role": "user", "content": SCRIPT}]

    def step(results: list[str] | None) -> Any:
        with client.chat.completions.stream(
            model="gpt-5-mini", messages=messages, tools=tools
        ) as stream:
            choice = stream.get_final_completion().choices[0]
        messages.append(choice.message)
        for call, result in zip(choice.message.tool_calls or [], results or [], strict=True):
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
        return choice

    forks = step(FORK_RESULTS)
    assert forks.finish_reason == "tool_calls"
    calls = forks.message.tool_calls or []
    named = [(call.function.name, json.loads(call.function.arguments)) for call in calls]
    assert named == FORKS
    assert len({call.id for call in calls}) == 3
    wait = step([WAIT_RESULT])
    calls = wait.message.tool_calls or []
    assert [(call.function.name, json.loads(call.function.arguments)) for call in calls] == WAIT
    answer = step(None)
    assert answer.finish_reason == "stop"
    assert answer.message.content == ANSWER and not answer.message.tool_calls


def test_gemini_collects_parallel_function_calls(simulator: SimulatorThread) -> None:
    client = genai.Client(
        api_key=KEY, http_options=genai_types.HttpOptions(base_url=simulator.base_url)
    )
    config = genai_types.GenerateContentConfig(
        tools=[
            genai_types.Tool(
                function_declarations=[
                    genai_types.FunctionDeclaration(name=name, description=name)
                    for name in TOOL_NAMES
                ]
            )
        ],
        automatic_function_calling=genai_types.AutomaticFunctionCallingConfig(disable=True),
    )
    contents: list[Any] = [genai_types.UserContent(parts=[genai_types.Part(text=SCRIPT)])]

    def step(results: list[str] | None) -> tuple[list[genai_types.FunctionCall], str]:
        chunks = list(
            client.models.generate_content_stream(
                model="gemini-2.5-flash-lite", contents=contents, config=config
            )
        )
        calls = [call for chunk in chunks for call in chunk.function_calls or []]
        text = "".join(chunk.text or "" for chunk in chunks if not chunk.function_calls)
        parts = [genai_types.Part(function_call=call) for call in calls]
        contents.append(genai_types.ModelContent(parts=parts or [genai_types.Part(text=text)]))
        if results is not None:
            contents.append(
                genai_types.UserContent(
                    parts=[
                        genai_types.Part.from_function_response(
                            name=call.name or "", response={"output": result}
                        )
                        for call, result in zip(calls, results, strict=True)
                    ]
                )
            )
        return calls, text

    forks, _ = step(FORK_RESULTS)
    assert [(call.name, call.args) for call in forks] == FORKS
    wait, _ = step([WAIT_RESULT])
    assert [(call.name, call.args) for call in wait] == WAIT
    calls, text = step(None)
    assert calls == []
    assert text == "".join(generated_words(json.dumps({"output": WAIT_RESULT}), TOKENS))
