"""Grove's own four wires against the simulator's scripted fan-out: each assembles all three
`fork` calls of one reply into its `AssistantTurn`, sends them back with their results in its
own request shape, and gets the step-2 `wait` call and then a text answer."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from grove.providers.base import AssistantTurn, Message, Request, ToolResultPart, ToolSpec
from grove.providers.factory import OpenAIAPI, create_provider
from grove.providers.http import Endpoint
from grove.simulator import SimulatorConfig, SimulatorThread
from grove.simulator.script import generated_words

KEY = "sim-grove-calls-key-64f0"
TOKENS = 6
FAN_OUT = (
    """[[sim calls='[{"name":"fork","args":{"prompt":"a"}},{"name":"fork","args":{"prompt":"b"}},"""
    """{"name":"fork","args":{"prompt":"c"}}]']] [[sim step=2 tool=wait args='{"timeout":5}']]"""
)
FORKS = [("fork", {"prompt": prompt}) for prompt in "abc"]
TOOLS = (
    ToolSpec(
        name="fork",
        description="Start a child agent.",
        parameters={"type": "object", "properties": {"prompt": {"type": "string"}}},
    ),
    ToolSpec(
        name="wait",
        description="Wait for the children.",
        parameters={"type": "object", "properties": {"timeout": {"type": "number"}}},
    ),
)
WireChoice = tuple[str, str, OpenAIAPI]
WIRES: list[WireChoice] = [
    ("anthropic", "claude-sonnet-4-6", "responses"),
    ("openai", "gpt-5-mini", "responses"),
    ("openai", "gpt-5-mini", "chat"),
    ("google", "gemini-3.0-flash", "responses"),
]
WIRE_IDS = ["anthropic", "openai-responses", "openai-chat", "google"]


@pytest.fixture(scope="module")
def simulator() -> Iterator[SimulatorThread]:
    with SimulatorThread(SimulatorConfig(api_key=KEY, tokens=TOKENS)) as running:
        yield running


@pytest.mark.parametrize("wire", WIRES, ids=WIRE_IDS)
async def test_grove_assembles_every_call_and_follows_the_steps(
    simulator: SimulatorThread, wire: WireChoice
) -> None:
    name, model, api = wire
    provider = create_provider(
        name,  # type: ignore[arg-type]
        endpoint=Endpoint(base_url=simulator.base_url, api_key=KEY),
        openai_api=api,
    )
    messages = [Message.user(f"Split this three ways. {FAN_OUT}")]

    async def step(results: list[str] | None) -> AssistantTurn:
        turn = await provider.complete(Request(model=model, messages=tuple(messages), tools=TOOLS))
        messages.append(turn.message)
        if results is not None:
            outcome = tuple(
                ToolResultPart(call_id=call.call_id, name=call.name, content=result)
                for call, result in zip(turn.tool_calls, results, strict=True)
            )
            messages.append(Message(role="user", parts=outcome))
        return turn

    try:
        forks = await step([f"child {prompt}: done" for prompt in "abc"])
        assert [(call.name, call.arguments) for call in forks.tool_calls] == FORKS
        assert len({call.call_id for call in forks.tool_calls}) == 3
        assert forks.text == ""
        wait = await step(["all three finished"])
        assert [(call.name, call.arguments) for call in wait.tool_calls] == [
            ("wait", {"timeout": 5})
        ]
        answer = await step(None)
    finally:
        await provider.aclose()
    assert answer.tool_calls == ()
    # The default answer comes from the results' text; Gemini's is the function response's JSON.
    results = '{"output": "all three finished"}' if name == "google" else "all three finished"
    assert answer.text == "".join(generated_words(results, TOKENS))
