"""Typed turns on every wire, the agent's loop against the simulator over real HTTP: a checked
answer, tools before it, malformed answers sent back with their problems at most `retries`
times and then kept with the last problem, native and forced-tool ways alike.
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Iterator
from typing import Any, Literal

import pytest
from pydantic import BaseModel, Field, field_validator
from ray import cloudpickle

from grove.actors.agent.choice import ModelChoice
from grove.actors.agent.tool import Tool
from grove.actors.agent.turn_loop import Agent, user_entry
from grove.actors.output import RETRY_KIND, OutputType
from grove.actors.turn_result import TurnResult
from grove.providers.base import ProviderName, ToolSpec
from grove.providers.factory import OpenAIAPI, create_provider
from grove.providers.http import Endpoint
from grove.providers.output_schema import checked_schema
from grove.simulator import SimulatorConfig, SimulatorThread

KEY = "sim-typed-turns-key"
WIRES: list[tuple[ProviderName, str, OpenAIAPI]] = [
    ("anthropic", "claude-sonnet-5-5", "responses"),  # output_config.format
    ("anthropic", "claude-3-7-sonnet-latest", "responses"),  # no structured outputs: a tool
    ("openai", "gpt-6.1-terra", "responses"),
    ("openai", "gpt-6.1-terra", "chat"),
    ("google", "gemini-3.8-flash", "responses"),
    ("google", "gemini-2.5-flash-lite", "responses"),  # with tools: a final function
]
IDS = ["anthropic", "anthropic-tool", "responses", "chat", "gemini", "gemini-2.5"]


class Location(BaseModel):
    file: str
    line: int = Field(ge=1, le=9999)


class Finding(BaseModel):
    severity: Literal["low", "medium", "high"]
    where: Location
    tags: list[str] = []
    note: str | None = None

    @field_validator("tags")
    @classmethod
    def no_empty_tags(cls, tags: list[str]) -> list[str]:
        if any(not tag for tag in tags):
            raise ValueError("tags cannot be empty")
        return tags


FINDING = OutputType.of(
    "Finding",
    checked_schema(Finding.model_json_schema()),
    2,
    cloudpickle.dumps(Finding),  # type: ignore[no-untyped-call]
)


@pytest.fixture(scope="module")
def simulator() -> Iterator[SimulatorThread]:
    with SimulatorThread(SimulatorConfig(api_key=KEY, tokens=6)) as running:
        yield running


async def lookup(arguments: dict[str, Any]) -> str:
    return f"{arguments.get('q')}: line 42 of app.py"


LOOKUP = Tool(
    spec=ToolSpec(
        name="lookup",
        description="Look a term up.",
        parameters={"type": "object", "properties": {"q": {"type": "string"}}},
    ),
    run=lookup,
)


async def turn(
    simulator: SimulatorThread,
    wire: tuple[ProviderName, str, OpenAIAPI],
    prompt: str,
    output: OutputType,
    tools: bool = False,
) -> TurnResult:
    name, model, api = wire
    endpoint = Endpoint(base_url=simulator.base_url, api_key=KEY)
    agent = Agent(
        "typed",
        ModelChoice(provider=name, model=model),
        [],
        lambda choice: create_provider(choice.provider, endpoint=endpoint, openai_api=api),
        tools={"lookup": LOOKUP} if tools else None,
    )
    try:
        return await agent.run_turn(user_entry(prompt), lambda event: None, output=output)
    finally:
        await agent.provider.aclose()


def kinds(result: TurnResult) -> list[str]:
    return [entry.kind for entry in result.entries]


@pytest.mark.parametrize("wire", WIRES, ids=IDS)
async def test_an_answer_after_a_tool_call_is_checked(
    simulator: SimulatorThread, wire: tuple[ProviderName, str, OpenAIAPI]
) -> None:
    prompt = '[[sim tool=lookup args=\'{"q": "bug"}\' step=1]] Review the patch.'
    result = await turn(simulator, wire, prompt, FINDING, tools=True)
    assert result.ok and result.output_error is None, result.error
    assert kinds(result) == ["user", "assistant", "tool_result", "assistant"]
    Finding.model_validate(result.output)
    assert json.loads(result.text) == json.loads(result.entries[-1].content)
    assert result.entries[-1].data["output"] == result.output


@pytest.mark.parametrize("wire", WIRES, ids=IDS)
async def test_malformed_answers_go_back_until_one_checks_out(
    simulator: SimulatorThread, wire: tuple[ProviderName, str, OpenAIAPI]
) -> None:
    result = await turn(simulator, wire, "Review. [[sim invalid_output=2]]", FINDING)
    assert result.output_error is None and result.output_retries == 2
    Finding.model_validate(result.output)
    assert kinds(result) == [
        "user",
        "assistant",
        RETRY_KIND,
        "assistant",
        RETRY_KIND,
        "assistant",
    ]
    retry = result.entries[2].content
    assert "did not match" in retry or "not valid JSON" in retry or "does not match" in retry
    assert result.retry_usage.output_tokens > 0
    assert result.usage.output_tokens > result.retry_usage.output_tokens


async def test_out_of_retries_keeps_the_raw_answer_and_the_last_problem(
    simulator: SimulatorThread,
) -> None:
    result = await turn(simulator, WIRES[2], "Review. [[sim invalid_output=5]]", FINDING)
    assert result.ok  # the turn ran; its answer is what failed
    assert result.output is None and result.output_retries == 2
    assert result.output_error is not None and "\n" not in result.output_error
    assert result.text == result.entries[-1].content  # the raw text is kept
    assert result.entries[-1].data["output_error"] == result.output_error
    assert kinds(result).count("assistant") == 3  # 1 + 2 retries, never more


async def test_the_model_validators_run_in_the_loop(simulator: SimulatorThread) -> None:
    bad = json.dumps({"severity": "low", "where": {"file": "a.py", "line": 3}, "tags": [""]})
    prompt = f"[[sim reply='{bad}']] Review."
    strict = OutputType.of("Finding", FINDING.schema, 0, FINDING.model)
    result = await turn(simulator, WIRES[2], prompt, strict)
    assert result.output_error is not None and "tags cannot be empty" in result.output_error


async def test_a_schema_dict_is_checked_with_its_own_rules(simulator: SimulatorThread) -> None:
    schema = checked_schema(
        {
            "type": "object",
            "properties": {"score": {"type": "integer", "minimum": 10}},
            "required": ["score"],
        }
    )
    output = OutputType.of("score", schema, 0)
    low = await turn(simulator, WIRES[4], "[[sim reply='{\"score\": 3}']] Rate.", output)
    assert low.output_error is not None and "/score: 3 is less than the minimum of 10" in (
        low.output_error
    )
    fine = await turn(simulator, WIRES[4], "Rate it.", output)
    assert fine.output["score"] >= 10


def test_an_output_type_travels_as_data() -> None:
    again = OutputType.from_data(json.loads(json.dumps(FINDING.to_data())))
    assert again == FINDING
    assert pickle.loads(again.model or b"") is not None
