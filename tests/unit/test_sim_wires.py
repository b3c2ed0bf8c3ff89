"""The simulator's four API modules on arbitrary JSON: reading refuses only with
`InvalidRequest`, and whatever it accepts is planned and written without error."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from grove.simulator.anthropic.messages import AnthropicMessages
from grove.simulator.config import SimulatorConfig
from grove.simulator.directives import DirectiveError
from grove.simulator.google.generate import GeminiGenerateContent
from grove.simulator.openai.chat import OpenAIChat
from grove.simulator.openai.responses import OpenAIResponses
from grove.simulator.script import Planner
from grove.simulator.wire import InvalidRequest, SimulatedAPI

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=12),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)
APIS: list[tuple[SimulatedAPI, str, dict[str, str]]] = [
    (AnthropicMessages(), "/v1/messages", {}),
    (OpenAIResponses(), "/v1/responses", {}),
    (OpenAIChat(), "/v1/chat/completions", {}),
    (GeminiGenerateContent(), "/v1beta/models/g:streamGenerateContent", {"alt": "sse"}),
]
PLANNER = Planner(SimulatorConfig(tokens=3))


@settings(max_examples=200)
@given(st.dictionaries(st.text(max_size=10), json_values, max_size=6))
def test_arbitrary_json_objects_are_read_or_refused(body: dict[str, Any]) -> None:
    for api, path, query in APIS:
        read_plan_write(api, path, query, body)


TOOL_TURN = (
    "[[sim tool=get args='{\"a\": 1}' reply=hi]] "
    '[[sim step=2 calls=\'[{"name": "get"}, {"name": "get", "args": {"b": 2}}]\']]'
)
TEMPLATES: dict[str, dict[str, Any]] = {
    "/v1/messages": {
        "model": "claude-haiku-4-5",  # thinking budgets; thinking blocks not bound to a prefix
        "max_tokens": 4096,
        "stream": True,
        "system": "s",
        "thinking": {"type": "enabled", "budget_tokens": 2048},
        "tools": [{"name": "get", "input_schema": {}}, {"name": "advise"}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": TOOL_TURN}]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "t", "signature": "s"},
                {"type": "tool_use", "id": "t", "name": "get"}]},
            {"role": "user", "content": [{"type": "tool_result", "content": [
                {"type": "text", "text": "[[sim@reviewer tool=advise]]"}]}]},
        ],
    },
    "/v1/responses": {
        "model": "m",
        "stream": True,
        "reasoning": {"effort": "low", "summary": "auto"},
        "include": ["reasoning.encrypted_content"],
        "tools": [{"type": "function", "name": "get"}],
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": TOOL_TURN}]},
            {"type": "function_call", "call_id": "c", "name": "get", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c", "output": "result"},
        ],
    },
    "/v1/chat/completions": {
        "model": "m",
        "stream": True,
        "stream_options": {"include_usage": True},
        "reasoning_effort": "high",
        "tools": [{"type": "function", "function": {"name": "get"}}],
        "messages": [
            {"role": "system", "content": "s"},
            {"role": "user", "content": [{"type": "text", "text": TOOL_TURN}]},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "get", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c", "content": "result"},
        ],
    },
    "/v1beta/models/g:streamGenerateContent": {
        "systemInstruction": {"parts": [{"text": "s"}]},
        "generationConfig": {"thinkingConfig": {"includeThoughts": True, "thinkingBudget": 9}},
        "tools": [{"functionDeclarations": [{"name": "get"}]}],
        "contents": [
            {"role": "user", "parts": [{"text": TOOL_TURN}]},
            {"role": "model", "parts": [{"functionCall": {"name": "get", "args": {}}}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "get", "response": {}}}]},
        ],
    },
}  # fmt: skip


def locations(value: object, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            found += locations(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += locations(item, (*path, index))
    return found


def replaced(value: Any, path: tuple[Any, ...], new: object) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: replaced(value[head], rest, new)}
    copy = list(value)
    copy[head] = replaced(copy[head], rest, new)
    return copy


ODD_VALUES: list[object] = [None, True, 0, -1, 5, 1.5, "", "x", [], [None], [1], {}, {"a": 1}]
scalars = st.sampled_from(ODD_VALUES) | json_values


def read_plan_write(api: SimulatedAPI, path: str, query: dict[str, str], body: Any) -> None:
    """Reading may refuse; anything accepted must plan and write without error."""
    try:
        inbound = api.read(path, query, body)
        plan = PLANNER.plan(inbound)
    except (InvalidRequest, DirectiveError):
        return
    frames = api.frames(plan, inbound)
    assert frames[-1].role == "terminal"
    api.body(plan, inbound)
    api.error_frames(inbound)


def test_every_single_field_replaced_by_every_odd_value() -> None:
    for api, path, query in APIS:
        template = TEMPLATES[path]
        for spot in locations(template)[1:]:
            for value in ODD_VALUES:
                read_plan_write(api, path, query, replaced(template, spot, value))


@settings(max_examples=300)
@given(st.data())
def test_mutated_valid_requests_are_read_or_refused(data: st.DataObject) -> None:
    for api, path, query in APIS:
        body = TEMPLATES[path]
        for _ in range(data.draw(st.integers(min_value=2, max_value=4))):
            spot = data.draw(st.sampled_from(locations(body)[1:]))
            body = replaced(body, spot, data.draw(scalars))
        read_plan_write(api, path, query, body)


def test_templates_are_valid_and_reach_step_two() -> None:
    for api, path, query in APIS:
        inbound = api.read(path, query, TEMPLATES[path])
        assert inbound.thinking and "get" in inbound.offered_tools
        assert (inbound.script, inbound.step) == (TOOL_TURN, 2)
        plan = PLANNER.plan(inbound)
        assert plan.thinking
        # Tool results end each conversation, so the script's step-2 directive applies: two
        # calls. The Anthropic request offers `advise`, so it is a reviewer's; no reviewer
        # directive has a step, and its tool results hold one.
        expected = [("advise", {})] if path == "/v1/messages" else [("get", {}), ("get", {"b": 2})]
        assert [(call.name, call.arguments) for call in plan.tool_calls] == expected


def test_gemini_signs_only_the_first_of_parallel_calls() -> None:
    api, path, query = APIS[3]
    inbound = api.read(path, query, TEMPLATES[path])
    plan = PLANNER.plan(inbound)
    assert len(plan.tool_calls) == 2 and plan.thinking
    parts = api.body(plan, inbound)["candidates"][0]["content"]["parts"]
    calls = [part for part in parts if "functionCall" in part]
    assert [("thoughtSignature" in part) for part in calls] == [True, False]
    assert not any("thoughtSignature" in part for part in parts if "functionCall" not in part)
    frames = [json.loads(frame.data.removeprefix(b"data: ")) for frame in api.frames(plan, inbound)]
    streamed = [part for chunk in frames for part in chunk["candidates"][0]["content"]["parts"]]
    first_call = next(part for part in streamed if "functionCall" in part)
    assert "thoughtSignature" in first_call
    assert sum("thoughtSignature" in part for part in streamed) == 1
