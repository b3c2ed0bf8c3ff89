"""Durable turns over a real Ray and the simulator: each step is stored as it ends, and a turn
whose host is SIGKILLed during its second tool call resumes on a new host from its last stored
step: no answered request sent again, no side effect repeated (counted in a file), the call
cut off reported to the model, or run again when its tool says it is idempotent.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel, Field

from grove.actors.agent.steps import interrupted_text
from grove.actors.tools.python import tool
from grove.providers.http import Endpoint
from grove.simulator import SimulatorConfig, SimulatorThread
from grove.supervisor import Budget, Grove
from grove.supervisor.errors import BUDGET_EXHAUSTED
from grove.supervisor.store import open_store
from grove.supervisor.usage import subtree, usage_report
from tests.integration.groves import running_grove
from tests.integration.host_kills import events, finish_all, host_died_index, kill_host

KEY = "sim-durable-turns-7c1e"
SLOW_LABEL = "2"  # the call during which the host is killed


def mark(path: str, label: str) -> str:
    """Record a side effect: append the label to the file (the second call takes a while).

    Args:
        path: the file counting side effects.
        label: which call this is.
    """
    with open(path, "a") as counted:
        counted.write(label + "\n")
    if label == SLOW_LABEL:
        time.sleep(4)
    return f"marked {label}"


@tool(idempotent=True)
def mark_again(path: str, label: str) -> str:
    """The same side effect from a tool that declares it safe to run twice.

    Args:
        path: the file counting side effects.
        label: which call this is.
    """
    return mark(path, label)


def three_calls(name: str, path: Path) -> str:
    """A task whose replies call `name` at steps 1, 2 and 3, then answer."""
    calls = " ".join(
        f"[[sim tool={name} args='{json.dumps({'path': str(path), 'label': str(step)})}' "
        f"step={step}]]"
        for step in (1, 2, 3)
    )
    return f"{calls} Mark three times, then say done."


@pytest.fixture(scope="module")
def simulator() -> Iterator[SimulatorThread]:
    with SimulatorThread(SimulatorConfig(api_key=KEY, tokens=4)) as running:
        yield running


@pytest.fixture(scope="module")
def grove(tmp_path_factory: pytest.TempPathFactory, simulator: SimulatorThread) -> Iterator[Grove]:
    """The module's Grove; its hosts are killed test after test, so it may replace them often."""
    env = {"GROVE_HOSTS__MAX_RESTARTS": "20"}
    endpoint = Endpoint(base_url=simulator.base_url, api_key=KEY)
    with running_grove(tmp_path_factory.mktemp("durable"), env=env, endpoint=endpoint) as g:
        yield g


@pytest.fixture
def setup(grove: Grove, simulator: SimulatorThread) -> tuple[Grove, SimulatorThread]:
    """The module's Grove and simulator, the simulator's bill counted from this test on (the
    tests before it waited for their turns' ends)."""
    billed = simulator.simulator.billed
    billed.update(dict.fromkeys(billed, 0))
    return grove, simulator


def killed_during_second_call(grove: Grove, name: str, path: Path) -> str:
    """Fork a child that runs the three-call task; SIGKILL its host while the second call
    runs; wait for the child's turn (resumed on the new host) to end. The child."""
    root = grove.create_root("claude-haiku-4-5", tools=[mark, mark_again]).uuid
    (child,) = grove.fork_many(root, [three_calls(name, path)])
    deadline = time.monotonic() + 60
    while not path.exists() or SLOW_LABEL not in path.read_text().split():
        assert time.monotonic() < deadline, "the second call never started"
        time.sleep(0.05)
    assert_stored_live(grove, child)
    kill_host(grove, grove.provider_identity(child)["host"])
    (result,) = finish_all(grove, [child]).values()
    assert result is not None and result.ok, result
    return child


def assert_stored_live(grove: Grove, child: str) -> None:
    """While the second call runs: both replies and the first result are stored, and their
    tool events are out (not at the turn's end)."""
    store = open_store(grove.settings.store)
    try:
        kinds = [m.kind for m in store.agent_messages(child)]
        assert kinds == ["user", "assistant", "tool_result", "assistant"]
        mine = [e.kind for e in store.events(limit=100_000) if e.payload.get("agent") == child]
        assert [k for k in mine if k.startswith("Tool")] == [
            "ToolCalled",
            "ToolResulted",
            "ToolCalled",
        ]
        assert "TurnCompleted" not in mine
    finally:
        store.close()


def test_a_turn_resumes_from_its_last_stored_step_without_repeating_a_side_effect(
    setup: tuple[Grove, SimulatorThread], tmp_path: Path
) -> None:
    """Each side effect once, each answered request sent once, and the tree's usage in the
    store is what the simulator billed, request for request."""
    grove, simulator = setup
    path = tmp_path / "effects.txt"
    child = killed_during_second_call(grove, "mark", path)
    assert path.read_text().split() == ["1", "2", "3"]  # each side effect once
    billed = simulator.simulator.billed
    assert billed["requests"] == 4  # four model steps; none answered was sent again
    store = open_store(grove.settings.store)
    try:
        messages = store.agent_messages(child)
        record = store.get_agent(child)
        assert record is not None and record.parent_uuid is not None
        root = store.get_agent(record.parent_uuid)
        assert root is not None
        recorded = usage_report(store, subtree(store, root)).total
        kinds = [m.kind for m in messages]
        assert kinds == ["user", *["assistant", "tool_result"] * 3, "assistant"]
        results = [m.data["parts"][0] for m in messages if m.kind == "tool_result"]
        assert [r["content"] for r in results] == [
            "marked 1",
            interrupted_text("mark"),
            "marked 3",
        ]
        assert results[1]["is_error"]
        interrupted = [e for e in events(store, "ToolInterrupted") if e["agent"] == child]
        assert [e["tool"] for e in interrupted] == ["mark"]
        called = [e for e in events(store, "ToolCalled") if e["agent"] == child]
        assert len(called) == 3  # each call announced once, across both hosts
    finally:
        store.close()
    assert (recorded.requests, recorded.input_tokens, recorded.output_tokens) == (
        billed["requests"],
        billed["input_tokens"],
        billed["output_tokens"],
    )


def test_an_idempotent_call_cut_off_runs_again(
    setup: tuple[Grove, SimulatorThread], tmp_path: Path
) -> None:
    grove, simulator = setup
    path = tmp_path / "effects.txt"
    child = killed_during_second_call(grove, "mark_again", path)
    assert path.read_text().split() == ["1", "2", "2", "3"]  # only the cut-off call twice
    assert simulator.simulator.billed["requests"] == 4
    store = open_store(grove.settings.store)
    try:
        results = [
            m.data["parts"][0]["content"]
            for m in store.agent_messages(child)
            if m.kind == "tool_result"
        ]
        assert results == ["marked 1", "marked 2", "marked 3"]
        assert not [e for e in events(store, "ToolInterrupted") if e["agent"] == child]
        reran = [e for e in events(store, "ToolResulted") if e["agent"] == child]
        assert [(e["tool"], e.get("rerun")) for e in reran] == [
            ("mark_again", None),
            ("mark_again", True),
            ("mark_again", None),
        ]
    finally:
        store.close()


def wait_for_label(path: Path, label: str) -> None:
    deadline = time.monotonic() + 60
    while not path.exists() or label not in path.read_text().split():
        assert time.monotonic() < deadline, f"call {label} never started"
        time.sleep(0.05)


def test_a_chat_turn_resumes_and_its_reader_follows_it(
    setup: tuple[Grove, SimulatorThread], tmp_path: Path
) -> None:
    """A turn its caller streams (as `grove chat` does): the host dies in the second call,
    the reader is told, then reads the resumed turn to its end on the new host."""
    grove, simulator = setup
    path = tmp_path / "effects.txt"
    root = grove.create_root("claude-haiku-4-5", tools=[mark]).uuid
    turn = grove.send(root, three_calls("mark", path))
    deltas: list[tuple[str, str]] = []
    reader = threading.Thread(target=lambda: deltas.extend(turn))
    reader.start()
    wait_for_label(path, SLOW_LABEL)
    kill_host(grove, grove.provider_identity(root)["host"])
    reader.join(120)
    assert not reader.is_alive()
    result = turn.result(60)
    assert result.ok, result.error
    assert path.read_text().split() == ["1", "2", "3"]
    assert simulator.simulator.billed["requests"] == 4
    died = host_died_index(deltas)
    assert died is not None
    after = deltas[died + 1 :]
    cut_off = f"mark failed: {interrupted_text('mark')}"
    assert any(kind == "tool_result" and cut_off.startswith(text[:-1]) for kind, text in after)
    assert any(kind == "tool_call" and "mark" in text and '"3"' in text for kind, text in after)
    assert "".join(text for kind, text in after if kind == "text") == result.text


class Marked(BaseModel):
    marks: int = Field(ge=0)
    done: bool


def test_a_resumed_turn_answers_to_the_type_it_was_sent_with(
    setup: tuple[Grove, SimulatorThread], tmp_path: Path
) -> None:
    """The output type given to `send` alone (the agent has none of its own) is stored with
    the prompt: the turn resumed on the new host still answers to it."""
    grove, _ = setup
    path = tmp_path / "effects.txt"
    root = grove.create_root("claude-haiku-4-5", tools=[mark]).uuid
    turn = grove.send(root, three_calls("mark", path), output_type=Marked)
    wait_for_label(path, SLOW_LABEL)
    kill_host(grove, grove.provider_identity(root)["host"])
    result = turn.result(120)
    assert result.ok, result.error
    assert isinstance(result.output, Marked), (result.output, result.output_error)
    assert path.read_text().split() == ["1", "2", "3"]


def test_a_child_of_the_fork_tool_resumes(
    setup: tuple[Grove, SimulatorThread], tmp_path: Path
) -> None:
    """A child a model forked with the `fork` tool, its host killed during its second call:
    it resumes, each side effect once; its parent's `wait` gets its answer."""
    grove, _ = setup
    path = tmp_path / "effects.txt"
    fork_args = json.dumps({"prompt": three_calls("mark", path)}).replace("'", "\\'")
    wait_args = json.dumps({"timeout": 120})
    parent_prompt = (
        f"[[sim tool=fork args='{fork_args}' step=1]] "
        f"[[sim tool=wait args='{wait_args}' step=2]] Delegate, then report."
    )
    root = grove.create_root("claude-haiku-4-5", tools=["fork", "wait", mark]).uuid
    turn = grove.send(root, parent_prompt)
    wait_for_label(path, SLOW_LABEL)
    (forked,) = [m for m in grove.history(root) if m.kind == "tool_result"]  # stored live
    child = json.loads(forked.data["parts"][0]["content"])["uuid"]
    kill_host(grove, grove.provider_identity(child)["host"])
    assert turn.result(120).ok
    child_result = grove.wait_turn(child, 120)
    assert child_result is not None and child_result.ok, child_result
    assert path.read_text().split() == ["1", "2", "3"]


def test_what_a_killed_host_held_of_a_budget_is_given_back(
    setup: tuple[Grove, SimulatorThread],
) -> None:
    """The request in flight when its host died held half the budget: given back, and
    counted at that estimate (the provider bills it), the turn resumes (else its request
    would wait for a hold that never settles). The budget then counts the estimate and the
    resumed reply, and nothing still held: its refusal of the next turn says so."""
    grove, simulator = setup
    budget = Budget(tokens=400, reserve_output=180)
    root = grove.create_root("claude-haiku-4-5", budget=budget).uuid
    turn = grove.send(root, "[[sim tps=8 tokens=40]] slowly")
    for kind, _ in turn:  # until its reply streams: its hold is taken
        if kind == "text":
            break
    kill_host(grove, grove.provider_identity(root)["host"])
    result = turn.result(60)
    assert result.ok, result.error
    assert simulator.simulator.billed["requests"] == 2  # the request cut off was billed too
    (spent,) = [m.data for m in grove.history(root) if m.kind == "spent"]
    (reply,) = [m.data for m in grove.history(root) if m.kind == "assistant"]
    assert spent["estimated"] and spent["usage"]["output_tokens"] == budget.reserve_output
    held = spent["usage"]["input_tokens"] + spent["usage"]["output_tokens"]
    replied = reply["usage"]["input_tokens"] + reply["usage"]["output_tokens"]
    assert 2 * held <= 400 < 2 * held + reply["usage"]["input_tokens"] + budget.reserve_output
    # ^ half the budget: kept held beside its estimate, the resumed request's hold had no room
    again = grove.ask(root, "once more")
    assert again.error is not None and again.error.startswith(
        f"{BUDGET_EXHAUSTED}tokens {held + replied}/400"
    ), again.error
