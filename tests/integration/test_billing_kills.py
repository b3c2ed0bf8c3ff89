"""A host SIGKILLed the moment its request was answered, before it told the supervisor what the
request was billed (the simulator kills it before the reply's last frame, over a real Ray): the
request is recorded once, at the estimate its host gave before sending it, and its budget gives
back what the request held and counts that estimate, as the store records it.
"""

from __future__ import annotations

import json
import os
import re
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from grove.actors.agent.estimates import ESTIMATED
from grove.providers.http import Endpoint
from grove.providers.thinking import anthropic_thinking
from grove.simulator import SimulatorConfig, SimulatorThread
from grove.simulator.script import Inbound
from grove.supervisor import Budget, Grove
from grove.supervisor.store import open_store
from grove.supervisor.store.kinds import SPENT_KIND
from tests.integration.groves import cli_environment, invoke, running_grove

KEY = "sim-billing-kills-41d8"
MODEL = "claude-haiku-4-5"
TOKENS = 20  # each reply's
RESERVE = 1000  # the reply tokens a request of the budgeted tree holds
LIMIT = 2600  # room for the request killed and the one that resumes it, not for a large one
MARK = "answered-as-its-host-died"


@pytest.fixture(scope="module")
def simulator() -> Iterator[SimulatorThread]:
    with SimulatorThread(SimulatorConfig(api_key=KEY, tokens=TOKENS)) as running:
        yield running


@pytest.fixture(scope="module")
def grove(tmp_path_factory: pytest.TempPathFactory, simulator: SimulatorThread) -> Iterator[Grove]:
    env = {"GROVE_HOSTS__MAX_RESTARTS": "20"}
    endpoint = Endpoint(base_url=simulator.base_url, api_key=KEY)
    with running_grove(
        tmp_path_factory.mktemp("billing"), hosts=1, env=env, endpoint=endpoint
    ) as running:
        yield running


def test_a_request_answered_as_its_host_dies_is_counted_once_at_its_estimate(
    grove: Grove, simulator: SimulatorThread
) -> None:
    root = grove.create_root(MODEL, budget=Budget(tokens=LIMIT, reserve_output=RESERVE)).uuid
    (pid,) = grove.host_pids().values()
    killed: list[str] = []

    def kill(inbound: Inbound) -> None:  # in the simulator, its reply's content all written
        if MARK in inbound.prompt and not killed:
            os.kill(pid, signal.SIGKILL)
            killed.append(inbound.prompt)

    before = dict(simulator.simulator.billed)
    simulator.simulator.before_end = kill
    try:
        result = grove.ask(root, f"Say something ({MARK}).")
    finally:
        simulator.simulator.before_end = None
    assert killed and result.ok, result.error
    billed = {name: simulator.simulator.billed[name] - before[name] for name in before}
    assert billed["requests"] == 2  # the reply its host never read, and the resumed turn's
    assert billed["output_tokens"] == 2 * TOKENS
    store = open_store(grove.settings.store)
    try:
        messages = store.agent_messages(root)
    finally:
        store.close()
    (answer,) = [m for m in messages if m.kind == "assistant"]
    (estimate,) = [m for m in messages if m.kind == SPENT_KIND]  # counted once, estimated
    assert estimate.data[ESTIMATED] is True
    exact, guessed = answer.data["usage"], estimate.data["usage"]
    # Both requests carried the same prompt and were billed alike: the answer's bill is exact,
    # the estimate is no less than what its request was billed, its reply at the hold.
    assert 2 * exact["input_tokens"] == billed["input_tokens"]
    assert exact["output_tokens"] == TOKENS
    assert guessed["input_tokens"] >= exact["input_tokens"]
    assert guessed["output_tokens"] == RESERVE
    # The budget gave the hold back (else the resumed request would have waited for room)
    # and counted the estimate: what it says it has spent is what the store records.
    refused = grove.ask(root, "words " * 1000)
    assert refused.error is not None
    spent = re.search(rf"tokens ([\d,]+)/{LIMIT:,}", refused.error)
    assert spent is not None, refused.error
    recorded = sum(u["input_tokens"] + u["output_tokens"] for u in (exact, guessed))
    assert int(spent.group(1).replace(",", "")) == recorded


def test_usage_says_what_part_is_estimated(
    grove: Grove, simulator: SimulatorThread, tmp_path: Path
) -> None:
    """A host killed with its reply written, no budget holding it: the request is counted at
    its reply's cap, and `grove usage` (table and JSON) says that part is an estimate."""
    root = grove.create_root(MODEL).uuid
    (pid,) = grove.host_pids().values()
    mark = f"{MARK}-unbudgeted"

    def kill(inbound: Inbound) -> None:
        if mark in inbound.prompt:
            simulator.simulator.before_end = None
            os.kill(pid, signal.SIGKILL)

    simulator.simulator.before_end = kill
    try:
        result = grove.ask(root, f"Say something ({mark}).")
    finally:
        simulator.simulator.before_end = None
    assert result.ok, result.error
    cap = anthropic_thinking(MODEL, None, None)[1]  # what an Anthropic request is sent with
    env = {**cli_environment(tmp_path), "GROVE_STORE": str(grove.settings.store)}
    shown = invoke(env, "usage", "--agent", root, "--json")
    assert shown.returncode == 0, shown.stderr
    total = json.loads(shown.stdout)["total"]
    assert (total["requests"], total["estimated_requests"]) == (2, 1)
    assert total["output_tokens"] == TOKENS + cap and total["estimated_output_tokens"] == cap
    assert 0 < total["estimated_input_tokens"] < total["input_tokens"]
    table = invoke(env, "usage", "--agent", root).stdout.splitlines()
    assert table[-2].startswith("total ")
    assert table[-1].startswith("estimated: 1 of the 2 requests"), table[-1]
    assert f"{total['estimated_input_tokens']:,} of the input" in table[-1]
    assert f"{cap:,} of the output tokens" in table[-1]


def test_a_request_waiting_to_be_sent_again_when_its_host_dies_is_not_counted(
    grove: Grove, simulator: SimulatorThread
) -> None:
    """Answered 429, its host waiting to send it again: not billed, not recorded."""
    root = grove.create_root(MODEL).uuid
    before = simulator.simulator.billed["requests"]
    turn = grove.send(root, "[[sim fault=429 retry_after=5 times=1]] once more, please")
    for kind, text in turn:  # until the host says it waits to send the request again
        if kind == "notice" and "retrying" in text:
            break
    (pid,) = grove.host_pids().values()
    os.kill(pid, signal.SIGKILL)
    result = turn.result(60)
    assert result.ok, result.error
    assert simulator.simulator.billed["requests"] - before == 1  # the resumed turn's
    store = open_store(grove.settings.store)
    try:
        kinds = [m.kind for m in store.agent_messages(root) if m.kind != "user"]
    finally:
        store.close()
    assert kinds == ["assistant"]  # nothing spent for the request that failed
