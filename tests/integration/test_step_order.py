"""The order durable steps keep, the agent's loop against the simulator over real HTTP with a
store that takes its time: a reply is stored before its calls run, a tool result before the
request that shows it to the model is sent, and a reply stored as a step tells what it was
billed through its store alone (unless the store fails; then nothing more is stored as the
turn goes, and its end stores the rest in order).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

from grove.actors.agent.choice import ModelChoice
from grove.actors.agent.estimates import ESTIMATED, is_bill
from grove.actors.agent.tool import Tool
from grove.actors.agent.turn_loop import Agent, user_entry
from grove.actors.turn_result import NewEntry, TurnResult
from grove.providers.base import ToolSpec
from grove.providers.factory import create_provider
from grove.providers.http import Endpoint
from grove.simulator import SimulatorConfig, SimulatorThread

KEY = "sim-step-order-key"
STORE_S = 0.3  # each store takes this long: a request sent without waiting would overtake it


@pytest.fixture(scope="module")
def simulator() -> Iterator[SimulatorThread]:
    with SimulatorThread(SimulatorConfig(api_key=KEY, tokens=4)) as running:
        yield running


def prompt(tag: str) -> str:
    """A task whose replies call `mark` at steps 1 and 2, then answer."""
    calls = " ".join(
        f"[[sim tool=mark args='{json.dumps({'label': f'{tag}-{step}'})}' step={step}]]"
        for step in (1, 2)
    )
    return f"{calls} Mark twice ({tag})."


class SlowStore:
    """Stores steps slowly, noting what the simulator had been sent when each store ended;
    `fail` makes every store fail."""

    def __init__(self, simulator: SimulatorThread, fail: bool = False) -> None:
        self.simulator = simulator
        self.fail = fail
        self.stored: list[tuple[NewEntry, str]] = []  # each step, and the requests sent by then
        self.calls = 0

    async def __call__(self, steps: list[tuple[int, NewEntry]]) -> list[int]:
        self.calls += 1
        await asyncio.sleep(STORE_S)
        if self.fail:
            raise ConnectionError("the store is unreachable")
        sent = json.dumps(list(self.simulator.simulator.received))
        self.stored += [(entry, sent) for _, entry in steps]
        return [len(self.stored) - len(steps) + i + 1 for i in range(len(steps))]


def bills(told: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the host told of what its requests were billed, without the estimates it gave
    before sending them."""
    return [data for data in told if is_bill(data)]


def estimates(told: list[dict[str, Any]]) -> int:
    return sum(1 for data in told if data.get(ESTIMATED))


async def run(
    simulator: SimulatorThread, store: SlowStore, tag: str
) -> tuple[TurnResult, list[str], list[dict[str, Any]]]:
    """One turn; the labels whose reply was stored when their call ran, and what was billed
    through the host's own word."""
    stored_at_call: list[str] = []

    async def mark(arguments: dict[str, Any]) -> str:
        label = str(arguments["label"])
        replies = [json.dumps(e.data["parts"]) for e, _ in store.stored if e.kind == "assistant"]
        if any(label in reply for reply in replies):
            stored_at_call.append(label)
        return f"marked {label}"

    spec = ToolSpec(
        name="mark",
        description="Mark a label.",
        parameters={"type": "object", "properties": {"label": {"type": "string"}}},
    )
    endpoint = Endpoint(base_url=simulator.base_url, api_key=KEY)
    agent = Agent(
        "ordered",
        ModelChoice(provider="anthropic", model="claude-haiku-4-5"),
        [],
        lambda choice: create_provider(choice.provider, endpoint=endpoint),
        tools={"mark": Tool(spec=spec, run=mark)},
    )
    told: list[dict[str, Any]] = []

    async def billed(data: dict[str, Any]) -> None:
        told.append(data)

    try:
        result = await agent.run_turn(user_entry(prompt(tag)), lambda _: None, billed, steps=store)
    finally:
        await agent.provider.aclose()
    return result, stored_at_call, told


async def test_each_step_is_stored_before_what_depends_on_it(simulator: SimulatorThread) -> None:
    store = SlowStore(simulator)
    result, stored_at_call, told = await run(simulator, store, "ordered")
    assert result.error is None and result.text
    assert stored_at_call == ["ordered-1", "ordered-2"]  # each reply stored before its call ran
    results = [(entry, sent) for entry, sent in store.stored if entry.kind == "tool_result"]
    assert len(results) == 2
    for entry, sent in results:  # no request showing the result was sent before it was stored
        assert entry.data["parts"][0]["content"] not in sent
    kinds = [entry.kind for entry, _ in store.stored]
    assert kinds == ["user", "assistant", "tool_result", "assistant", "tool_result"]
    assert len(bills(told)) == 1  # the answer; the two replies stored as steps told it themselves
    assert estimates(told) == 3  # each request announced with its estimate before it went
    assert all("message_id" in entry.data for entry in result.entries[:-1])


async def test_a_failed_store_tells_the_bill_and_leaves_the_rest_to_the_turns_end(
    simulator: SimulatorThread,
) -> None:
    store = SlowStore(simulator, fail=True)
    result, _, told = await run(simulator, store, "unstored")
    assert result.error is None and result.text
    assert store.calls == 1  # after the first failure nothing more is stored as the turn goes
    assert len(bills(told)) == 3  # each reply's bill told by the host, the stored step being lost
    assert estimates(told) == 3
    assert not any("message_id" in entry.data for entry in result.entries)
