"""Python functions as tools (actors/tools/python.py): schemas from signatures and docstrings,
validation errors a model can act on, timeouts, capped results, exceptions as results, sync
code off the event loop, and the agent loop's concurrency rules for one step's calls.
"""

from __future__ import annotations

import asyncio
import time
from typing import Annotated, Any, Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from grove.actors.agent.choice import ModelChoice
from grove.actors.agent.tool import Tool
from grove.actors.agent.turn_loop import Agent
from grove.actors.errors import ToolError
from grove.actors.tools.python import (
    RESULT_CAP_CHARS,
    ToolDefinitionError,
    capped,
    parse_docstring,
    python_tool,
    tool,
)
from grove.actors.turn_result import TurnResult
from grove.providers.accumulate import parse_arguments
from grove.providers.base import ToolCallPart
from grove.providers.stream_events import Provider
from tests.unit.loop_checks import with_ticks


class Point(BaseModel):
    x: int
    y: int = 0


def locate(
    city: str,
    unit: Literal["metric", "imperial"] = "metric",
    days: Annotated[int, Field(ge=1, le=7, description="How many days ahead")] = 1,
    near: Point | None = None,
) -> str:
    """Look up the forecast of a city.

    Spreads over two lines of summary? No: the first paragraph ends above.

    Args:
        city: The city's name,
            as people write it.
        unit: Units of the answer.

    Returns:
        The forecast.
    """
    return f"{city} {unit} {days} {near.x if near else '-'}"


def test_the_schema_comes_from_the_signature_and_docstring() -> None:
    made = python_tool(locate)
    assert made.spec.name == "locate"
    assert made.spec.description == "Look up the forecast of a city."
    schema = made.spec.parameters
    assert schema["required"] == ["city"]
    assert schema["additionalProperties"] is False
    properties = schema["properties"]
    assert properties["city"]["description"] == "The city's name, as people write it."
    assert properties["unit"]["enum"] == ["metric", "imperial"]
    assert properties["unit"]["default"] == "metric"
    assert properties["days"]["description"] == "How many days ahead"
    assert properties["days"]["maximum"] == 7
    assert "Point" in schema["$defs"]


def test_docstring_sections_after_args_are_not_parameters() -> None:
    summary, notes = parse_docstring("Do it.\n\nArgs:\n    a: first\n\nReturns:\n    b: no")
    assert (summary, notes) == ("Do it.", {"a": "first"})


async def test_arguments_are_validated_and_errors_name_the_field() -> None:
    made = python_tool(locate)
    assert await made.run({"city": "Oslo", "near": {"x": 3}}) == "Oslo metric 1 3"
    with pytest.raises(ToolError) as caught:
        await made.run({"unit": "kelvin", "days": 9})
    text = str(caught.value)
    assert text.startswith("Invalid arguments for locate: ")
    assert "city: Field required" in text
    assert "unit: Input should be 'metric' or 'imperial' (got 'kelvin')" in text
    assert "days: Input should be less than or equal to 7 (got 9)" in text
    with pytest.raises(ToolError, match="bogus: Extra inputs are not permitted"):
        await made.run({"city": "Oslo", "bogus": 1})


@given(st.dictionaries(st.text(max_size=8), st.none() | st.integers() | st.text(max_size=8)))
def test_any_arguments_give_a_result_or_a_tool_error(arguments: dict[str, Any]) -> None:
    made = python_tool(locate)
    try:
        asyncio.run(made.run(arguments))
    except ToolError as exc:
        assert str(exc).startswith("Invalid arguments for locate: ")


async def test_an_exception_is_its_type_and_message_with_the_traceback_apart() -> None:
    def explode(path: str) -> str:
        """Fail."""
        raise FileNotFoundError(f"no such file: {path}")

    with pytest.raises(ToolError) as caught:
        await python_tool(explode).run({"path": "a.txt"})
    assert str(caught.value) == "FileNotFoundError: no such file: a.txt"
    assert "Traceback" in caught.value.detail and "explode" in caught.value.detail


async def test_a_slow_call_times_out_with_the_reference_text() -> None:
    @tool(timeout_s=0.2)
    async def slow() -> str:
        """Too slow."""
        await asyncio.sleep(5)
        return "late"

    with pytest.raises(ToolError) as caught:
        await python_tool(slow).run({})
    assert str(caught.value) == "Tool slow timed out after 0.2 s"


async def test_results_become_text_and_are_capped_head_and_tail() -> None:
    def shaped(kind: str) -> Any:
        """Return something."""
        return {"none": None, "model": Point(x=1), "list": [1, "a"], "text": "t"}[kind]

    made = python_tool(shaped)
    assert [await made.run({"kind": k}) for k in ("none", "model", "list", "text")] == [
        "",
        '{"x":1,"y":0}',
        '[1,"a"]',
        "t",
    ]

    def opaque() -> object:
        """Return an object."""
        return object()

    with pytest.raises(
        ToolError, match="returned a value of type object, which is neither text nor JSON"
    ):
        await python_tool(opaque).run({})
    text = "h" * RESULT_CAP_CHARS + "middle" + "t" * RESULT_CAP_CHARS
    cut = capped(text)
    assert len(cut) < RESULT_CAP_CHARS + 100
    assert cut.startswith("h" * 1000) and cut.endswith("t" * 1000)
    assert f"[... {len(text) - RESULT_CAP_CHARS:,} characters cut ...]" in cut


def test_functions_that_cannot_be_tools_are_refused_with_the_reason() -> None:
    def star(*args: int) -> str:
        return ""

    def unbuildable(value: asyncio.Queue[int]) -> str:
        return ""

    with pytest.raises(ToolDefinitionError, match=r"tool star: \*args and \*\*kwargs"):
        python_tool(star)
    with pytest.raises(ToolDefinitionError, match="tool unbuildable: pydantic cannot build"):
        python_tool(unbuildable)
    with pytest.raises(ToolDefinitionError, match="tool 'bad name'"):
        python_tool(tool(name="bad name")(locate))


async def test_a_sync_tool_runs_off_the_event_loop() -> None:
    def blocking(seconds: float) -> str:
        """Sleep in a thread."""
        time.sleep(seconds)
        return "slept"

    result, ticks = await with_ticks(python_tool(blocking).run({"seconds": 0.6}))
    assert result == "slept"
    assert ticks >= 6  # the loop kept running while the tool slept


def sleeper(name: str, sequential: bool, happened: list[str] | None = None) -> Tool:
    """A tool that sleeps a moment; `happened` gets "begin label" and "end label" around it."""

    @tool(name=name, sequential=sequential)
    def nap(label: str) -> str:
        """Sleep one second."""
        if happened is not None:
            happened.append(f"begin {label}")
        time.sleep(1)
        if happened is not None:
            happened.append(f"end {label}")
        return label

    return python_tool(nap).as_tool()


def no_provider(choice: ModelChoice) -> Provider:
    raise AssertionError("no model is asked in these tests")


async def run_step(tools: dict[str, Tool], calls: list[tuple[str, str]]) -> list[str]:
    """One step's tool calls through the agent loop's own runner: their results."""
    agent = Agent("a", None, [], no_provider, tools=tools)
    result = TurnResult()
    parts = tuple(
        ToolCallPart(call_id=f"c{i}", name=name, arguments={"label": label}, signature=None)
        for i, (name, label) in enumerate(calls)
    )
    await agent._run_tools(result, parts, lambda event: None)
    return [part["content"] for part in results_by_call(result)]


def results_by_call(result: TurnResult) -> list[dict[str, Any]]:
    """The step's results (one entry each, in the order they came), in call order."""
    parts = [part for entry in result.entries for part in entry.data["parts"]]
    assert [entry.kind for entry in result.entries] == ["tool_result"] * len(parts)
    return sorted(parts, key=lambda part: part["call_id"])


async def test_the_calls_of_one_step_run_at_once_unless_sequential() -> None:
    """At once: both calls have begun before either ends; sequential: one ends, then the
    next begins, in the order they were called."""
    happened: list[str] = []
    tools = {"nap": sleeper("nap", False, happened), "queue": sleeper("queue", True, happened)}
    assert await run_step(tools, [("nap", "a"), ("nap", "b")]) == ["a", "b"]
    assert sorted(happened[:2]) == ["begin a", "begin b"]
    assert sorted(happened[2:]) == ["end a", "end b"]
    happened.clear()
    assert await run_step(tools, [("queue", "a"), ("queue", "b")]) == ["a", "b"]
    assert happened == ["begin a", "end a", "begin b", "end b"]


async def test_arguments_that_are_not_a_json_object_are_an_error_result() -> None:
    agent = Agent("a", None, [], no_provider, tools={"nap": sleeper("nap", False)})
    result = TurnResult()
    calls = tuple(
        ToolCallPart(call_id=f"c{i}", name="nap", arguments=parse_arguments(raw), signature=None)
        for i, raw in enumerate(['{"label": "unfinished', "[1, 2]"])
    )
    await agent._run_tools(result, calls, lambda event: None)
    contents = [(part["content"], part["is_error"]) for part in results_by_call(result)]
    assert contents[0][1] and contents[0][0].startswith("The arguments of nap were not valid JSON")
    assert contents[1] == (
        "The arguments of nap were a JSON list, not an object; send a JSON object",
        True,
    )
