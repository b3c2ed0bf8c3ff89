"""Agents on the batch tier end to end (SPEC 20), over a real Ray and the simulator's Message
Batches: each step's request joins its provider's rolling batch, several agents' steps in one,
each answered by its own custom id; a tool loop takes one batch round per step; replies are
billed at the batch price. A supervisor killed between a batch's send and its results polls
the same batch after its restart: nothing is sent again, every turn finishes. On a SQLite and
a Redis store alike.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
import ray

from grove.providers.base import Usage
from grove.providers.http import Endpoint
from grove.providers.pricing import cost_usd
from grove.simulator import SimulatorConfig, SimulatorThread
from grove.supervisor import Grove
from grove.supervisor.store import Store, open_store
from grove.supervisor.tree_view import tree_rows
from tests.integration.groves import running_grove, sim_call
from tests.integration.host_kills import events, finish_all, kill_host, wait_for_event

KEY = "sk-batch-tier-canary-77c2e9a1"
MODEL = "claude-haiku-4-5"
WINDOW = {"GROVE_TIERS__BATCH_WINDOW_S": "1.0"}


def shout(text: str) -> str:
    """Say it louder."""
    return text.upper() + "!"


@pytest.fixture(scope="module")
def simulator() -> Iterator[SimulatorThread]:
    # Batches take 2 s: long enough for a supervisor to be killed with one open.
    config = SimulatorConfig(api_key=KEY, tokens=6, batch_delay_s=2.0)
    with SimulatorThread(config) as running:
        yield running


@pytest.fixture(scope="module", params=["sqlite", "redis"])
def grove(
    request: pytest.FixtureRequest,
    simulator: SimulatorThread,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Grove]:
    """A Grove on the simulator, its store SQLite or Redis (the open batches live in either)."""
    base = tmp_path_factory.mktemp("grove")
    store_url = f"sqlite:///{base / 'grove.sqlite3'}"
    if request.param == "redis":
        namespace = f"batch-tier-{uuid.uuid4().hex[:12]}"
        store_url = f"{request.getfixturevalue('redis_url')}?namespace={namespace}"
    endpoint = Endpoint(base_url=simulator.base_url, api_key=KEY)
    with running_grove(base, endpoint=endpoint, env=WINDOW, store_url=store_url) as running:
        yield running


@pytest.fixture
def store(grove: Grove) -> Iterator[Store]:
    opened = open_store(grove.settings.store)
    yield opened
    opened.close()


def billed(simulator: SimulatorThread) -> dict[str, dict[str, int]]:
    return {tier: dict(counts) for tier, counts in simulator.simulator.billing.by_tier.items()}


def batch_requests(simulator: SimulatorThread) -> int:
    return billed(simulator).get("batch", {}).get("requests", 0)


def turn_shown(store: Store, agent: str) -> str:
    """What the dashboard's tree shows of the agent's turn."""
    (row,) = [row for row in tree_rows(store)["agents"] if row["uuid"] == agent]
    return str(row["turn"])


def shown_waiting(store: Store, agent: str, timeout_s: float = 60) -> None:
    """Until the dashboard's tree shows the agent's turn waiting on a batch (the events that say
    so and the batch's own may be stored in either order)."""
    deadline = time.monotonic() + timeout_s
    while (shown := turn_shown(store, agent)) != "batch":
        assert time.monotonic() < deadline, f"the turn is shown {shown!r}, not waiting on a batch"
        time.sleep(0.1)


def sent_requests(store: Store) -> int:
    return sum(int(str(sent["requests"])) for sent in events(store, "BatchSent"))


def test_agents_on_the_batch_tier_run_a_tool_loop_one_batch_round_a_step(
    grove: Grove, store: Store, simulator: SimulatorThread
) -> None:
    before, sent_before = batch_requests(simulator), sent_requests(store)
    standard_before = billed(simulator).get("standard", {}).get("requests", 0)
    root = grove.create_root(MODEL, tools=[shout], tier="batch").uuid
    words = [f"word{number}" for number in range(4)]
    children = grove.fork_many(root, [sim_call("shout", text=word) for word in words])
    results = finish_all(grove, children)
    for child, word in zip(children, words, strict=True):
        result = results[child]
        assert result is not None and result.ok, result
        history = grove.history(child)
        assert [m.kind for m in history[-3:]] == ["assistant", "tool_result", "assistant"]
        (part,) = history[-2].data["parts"]
        assert part["content"] == f"{word.upper()}!"
        for reply in (history[-3], history[-1]):  # billed at the batch price
            usage = Usage(**reply.data["usage"])
            assert reply.data["cost_usd"] == cost_usd(MODEL, usage, tier="batch") > 0
            assert reply.data["tier"] == "batch"
    steps = 2 * len(children)  # two batch rounds each: the call, then the answer
    assert batch_requests(simulator) - before == steps
    assert sent_requests(store) - sent_before == steps
    assert billed(simulator).get("standard", {}).get("requests", 0) == standard_before
    sizes = [int(str(sent["requests"])) for sent in events(store, "BatchSent")]
    assert max(sizes) > 1  # the agents' steps went together
    waiting = {str(e["agent"]) for e in events(store, "BatchWaiting")}
    assert set(children) <= waiting  # the event log shows each step waiting on its batch


def test_a_supervisor_killed_mid_batch_polls_the_same_batch_after_its_restart(
    grove: Grove, store: Store, simulator: SimulatorThread
) -> None:
    root = grove.create_root(MODEL, tier="batch").uuid
    prompts = [f"task {number} on the batch tier" for number in range(5)]
    before, sent_before = batch_requests(simulator), sent_requests(store)
    sent_count = len(events(store, "BatchSent"))
    children = grove.fork_many(root, prompts)
    wait_for_event(store, "BatchSent", sent_count + 1)
    assert batch_requests(simulator) == before  # sent, not yet answered
    ray.kill(grove.supervisor, no_restart=False)
    results = finish_all(grove, children)  # waits out the supervisor's restart
    assert all(result is not None and result.ok for result in results.values()), results
    assert events(store, "BatchesResumed")
    assert batch_requests(simulator) - before == len(prompts)  # each answered, and paid, once
    assert sent_requests(store) - sent_before == len(prompts)  # none sent again
    for child in children:
        assert [m.kind for m in grove.history(child)[-2:]] == ["user", "assistant"]


def test_a_host_killed_while_its_steps_wait_on_a_batch_rejoins_the_same_batch(
    grove: Grove, store: Store, simulator: SimulatorThread
) -> None:
    root = grove.create_root(MODEL, tier="batch").uuid
    prompts = [f"host task {number} on the batch tier" for number in range(4)]
    before, sent_before = batch_requests(simulator), sent_requests(store)
    sent_count = len(events(store, "BatchSent"))
    children = grove.fork_many(root, prompts)
    wait_for_event(store, "BatchSent", sent_count + 1)
    kill_host(grove, grove.provider_identity(children[0])["host"])
    results = finish_all(grove, children)  # the killed host's turns resume on its successor
    assert all(result is not None and result.ok for result in results.values()), results
    assert batch_requests(simulator) - before == len(prompts)  # each answered, and paid, once
    assert sent_requests(store) - sent_before == len(prompts)  # none sent again


def test_cancelling_a_turn_waiting_on_a_batch_cancels_the_vendors_batch(
    grove: Grove, store: Store, simulator: SimulatorThread
) -> None:
    agent = grove.create_root(MODEL, tier="batch").uuid
    sent_count = len(events(store, "BatchSent"))
    cancelled_count = len(events(store, "BatchCancelled"))
    turn = grove.send(agent, "a question that will not wait")
    wait_for_event(store, "BatchSent", sent_count + 1)
    shown_waiting(store, agent)
    assert grove.cancel(agent)
    result = turn.result(60)
    assert result.cancelled, result
    wait_for_event(store, "BatchCancelled", cancelled_count + 1)
    (cancelled,) = events(store, "BatchCancelled")[cancelled_count:]
    assert cancelled["batch"] == events(store, "BatchSent")[sent_count]["batch"]
    assert agent not in {record.agent for record in store.batch_steps.all()}
    again = grove.ask(agent, "and now?")
    assert again.ok, again.error  # its next turn gets its own batch
    assert turn_shown(store, agent) == "idle"


def test_batched_requests_keep_their_cache_marks(
    grove: Grove, store: Store, simulator: SimulatorThread
) -> None:
    guide = " ".join(
        f"Rule {number}: keep the river banks clear of debris." for number in range(400)
    )
    root = grove.create_root(MODEL, tier="batch").uuid
    assert grove.ask(root, f"Learn this guide. {guide}").ok
    read_before = billed(simulator)["batch"]["cache_read_tokens"]
    children = grove.fork_many(root, [f"Apply rule {number}." for number in range(3)])
    results = finish_all(grove, children)
    assert all(result is not None and result.ok for result in results.values())
    # The forks' shared conversation went with its cache mark: read from the cache at the
    # batch tier, not sent whole three times.
    assert billed(simulator)["batch"]["cache_read_tokens"] - read_before > 3 * 2000
