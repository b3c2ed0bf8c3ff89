"""The control plane over a real local Ray: command order, sessions, placement, providers,
forked conversations and the streaming rule, each against the simulator and a SQLite file.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import ray

from grove.actors.collector import THRESHOLDS
from grove.providers.catalog import near_miss_text
from grove.providers.http import Endpoint
from grove.simulator import SimulatorConfig, SimulatorThread
from grove.supervisor import Grove
from grove.supervisor.errors import CommandError
from grove.supervisor.rules import NO_MODEL_TEXT, STREAMING_SWITCH_TEXT
from grove.supervisor.store import SqliteStore, Store
from tests.integration.groves import running_grove

HOSTS = 3
KEY = "sim-supervisor-5d02"


@pytest.fixture(scope="module")
def simulator() -> Iterator[SimulatorThread]:
    """The module's simulator, whose per-API bill says which endpoint a reply came from."""
    with SimulatorThread(SimulatorConfig(port=0, api_key=KEY)) as running:
        yield running


@pytest.fixture(scope="module")
def grove(
    simulator: SimulatorThread, store_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Grove]:
    endpoint = Endpoint(base_url=simulator.base_url, api_key=KEY)
    with running_grove(
        tmp_path_factory.mktemp("grove"), store_url=store_url, endpoint=endpoint, hosts=HOSTS
    ) as grove:
        yield grove


def requests_by_api(simulator: SimulatorThread) -> dict[str, int]:
    """How many requests the simulator answered on each vendor's API so far."""
    billed: dict[str, dict[str, Any]] = simulator.simulator.stats()["billed_by_api"]
    return {api: bill["requests"] for api, bill in billed.items()}


def test_commands_in_one_session_run_in_arrival_order(grove: Grove, store: Store) -> None:
    root = grove.create_root("claude-sonnet-5-5")
    levels = ("none", "low", "med", "high")
    models = [
        f"{m}/{levels[i % 4]}"
        for i, m in enumerate(
            [
                "gpt-6.1-terra",
                "claude-haiku-4-5",
                "gemini-3.8-flash",
                "gpt-6-sol",
                "claude-opus-5-5",
            ]
            * 4
        )
    ]
    refs = [grove.supervisor.dispatch.remote(root.uuid, f"/model {m}", "api") for m in models]
    outcomes = ray.get(refs, timeout=120)
    assert all(outcome.ok for outcome in outcomes)
    events = store.events(limit=100_000)
    # Arrival is when the bus first sees a command (its CommandDispatched event); Ray itself
    # does not promise that an async actor starts calls in the order they were submitted.
    arrived = [
        e.payload["args"]
        for e in events
        if e.kind == "CommandDispatched" and e.payload["agent"] == root.uuid
    ]
    switched = [
        f"{e.payload['model']}/{e.payload['thinking']}"
        for e in events
        if e.kind == "ModelSwitched" and e.payload["agent"] == root.uuid
    ]
    assert sorted(arrived) == sorted(models)
    assert switched == arrived
    models = arrived
    record = store.get_agent(root.uuid)
    assert record is not None and f"{record.model}/{record.thinking_level}" == models[-1]
    dispatched = {
        e.payload["correlation_id"]: e.id for e in events if e.kind == "CommandDispatched"
    }
    resulted = {e.payload["correlation_id"]: e.id for e in events if e.kind == "CommandResulted"}
    assert dispatched.keys() == resulted.keys()
    assert all(dispatched[key] < resulted[key] for key in dispatched)
    kinds = [e.kind for e in events]
    assert kinds.count("CommandDispatched") == kinds.count("CommandResulted") == len(dispatched)


def test_a_held_session_does_not_block_another(grove: Grove, store_url: str) -> None:
    busy = grove.create_root("gpt-6.1-terra")
    free = grove.create_root("gpt-6.1-terra")
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        async def run() -> None:
            lease_store = SqliteStore(Path(store_url.removeprefix("sqlite:///")))
            async with lease_store.lease(busy.uuid, 10):
                held.set()
                await asyncio.to_thread(release.wait, 30)
            lease_store.close()

        asyncio.run(run())

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(10)
        waiting = grove.supervisor.dispatch.remote(busy.uuid, "/model gpt-6-sol", "api")
        other = ray.get(
            grove.supervisor.dispatch.remote(free.uuid, "/model gpt-6-sol", "api"), timeout=20
        )
        assert other.ok
        ready, _ = ray.wait([waiting], timeout=0.5)
        assert not ready  # session `busy` waits for its lease, in another process's hands
    finally:
        release.set()
        holder.join()
    assert ray.get(waiting, timeout=20).ok


def test_agents_spread_over_hosts_and_never_share_a_provider(grove: Grove) -> None:
    roots = [grove.create_root("gemini-3.8-flash") for _ in range(50)]
    turns = [grove.send(root.uuid, f"task {index}") for index, root in enumerate(roots)]
    assert all(turn.result(60).ok for turn in turns)
    identities = [grove.provider_identity(root.uuid) for root in roots]
    assert {identity["host"] for identity in identities} == {f"host-{i}" for i in range(HOSTS)}
    assert len({identity["pid"] for identity in identities}) == HOSTS
    providers = {(identity["pid"], identity["provider"]) for identity in identities}
    clients = {(identity["pid"], identity["client"]) for identity in identities}
    assert None not in {identity["client"] for identity in identities}
    assert len(providers) == len(clients) == 50


def test_model_switch_replaces_the_provider_on_next_request(
    grove: Grove, simulator: SimulatorThread
) -> None:
    """The reply after `/model` is asked of the new vendor's API for the new model, by a new
    provider object: the simulator counts the request on OpenAI's API, not Anthropic's, and
    the stored reply names the provider and the model the response reported."""
    root = grove.create_root("claude-haiku-4-5")
    assert grove.ask(root.uuid, "first").ok
    before = grove.provider_identity(root.uuid)
    assert grove.dispatch(root.uuid, "/model gpt-6-luna").ok
    assert grove.provider_identity(root.uuid)["provider"] is None
    asked = requests_by_api(simulator)
    assert grove.ask(root.uuid, "second").ok
    answered = requests_by_api(simulator)
    grown = {api: count - asked.get(api, 0) for api, count in answered.items()}
    assert {api: more for api, more in grown.items() if more} == {"openai-responses": 1}
    first, second = [m.data for m in grove.history(root.uuid) if m.kind == "assistant"]
    assert (first["provider"], first["model"]) == ("anthropic", "claude-haiku-4-5")
    assert (second["provider"], second["model"]) == ("openai", "gpt-6-luna")
    after = grove.provider_identity(root.uuid)
    assert after["provider"] is not None and after["provider"] != before["provider"]


def test_model_switch_rejected_only_for_the_streaming_agent(grove: Grove) -> None:
    slow = grove.create_root("claude-sonnet-5-5")
    other = grove.create_root("claude-sonnet-5-5")
    turn = grove.send(slow.uuid, "[[sim ttft_ms=2000]] take your time")
    rejected = grove.dispatch(slow.uuid, "/model gpt-6-sol")
    accepted = grove.dispatch(other.uuid, "/model gpt-6-sol")
    assert not rejected.ok and rejected.text == STREAMING_SWITCH_TEXT
    assert accepted.ok and accepted.text.startswith("Switched to OpenAI gpt-6-sol")
    assert turn.result(30).ok
    assert grove.agent(slow.uuid).model == "claude-sonnet-5-5"


def test_a_wait_that_times_out_is_none_not_an_error(grove: Grove) -> None:
    """As the HTTP API's /wait and the MCP server's grove_wait read it: None while the turn
    goes on, its result once it ended."""
    slow = grove.create_root("claude-sonnet-5-5")
    turn = grove.send(slow.uuid, "[[sim ttft_ms=2000]] take your time")
    assert grove.wait_turn(slow.uuid, 0.2) is None
    assert turn.result(30).ok
    waited = grove.wait_turn(slow.uuid, 0.2)
    assert waited is not None and waited.ok


def test_model_picked_in_a_chat_gets_the_command_lines_checks(grove: Grove, store: Store) -> None:
    """/model and /fork --model refuse a typo of a catalog id and a retired model as the flags
    do, naming the successor, and change nothing; a deprecated model's answer names its
    shutdown date and successor; `PROVIDER:MODEL` is taken as written."""
    root = grove.create_root("claude-sonnet-5-5")
    typo = near_miss_text("claude-sonet-5-5", "anthropic", "claude-sonnet-5-5")
    refused = grove.dispatch(root.uuid, "/model claude-sonet-5-5/low")
    assert not refused.ok and refused.text == typo
    forked = grove.dispatch(root.uuid, "/fork --model claude-sonet-5-5")
    assert not forked.ok and forked.text == typo
    retired = "claude-sonnet-4-5 was retired on 2026-11-30; use claude-sonnet-5-5"
    for line in ("/model claude-sonnet-4-5/med", '/fork --model claude-sonnet-4-5 "go on"'):
        outcome = grove.dispatch(root.uuid, line)
        assert not outcome.ok and outcome.text == retired, line
    assert grove.agent(root.uuid).model == "claude-sonnet-5-5"
    assert store.children(root.uuid) == []  # the refused fork made no child
    deprecated = "Warning: gpt-5-mini is deprecated and shuts down on 2026-12-11; use gpt-6.1-terra"
    child = grove.dispatch(root.uuid, "/fork --model gpt-5-mini")
    assert child.ok and child.text.endswith(f"\n{deprecated}"), child.text
    retiring = grove.dispatch(root.uuid, "/model gpt-5-mini")
    assert retiring.ok and retiring.text.endswith(f"\n{deprecated}"), retiring.text
    as_written = grove.dispatch(root.uuid, "/model anthropic:claude-sonet-5-5")
    assert as_written.ok and grove.agent(root.uuid).model == "claude-sonet-5-5"
    with pytest.raises(CommandError) as root_refused:
        grove.create_root("claude-sonnet-4-5")
    assert str(root_refused.value) == retired


def test_forked_conversations_hold_exactly_their_prefix(grove: Grove) -> None:
    root = grove.create_root("gpt-6.1-terra")
    for index in range(3):
        assert grove.ask(root.uuid, f"exchange {index}").ok
    parent_before = [m.id for m in grove.history(root.uuid)]
    assert len(parent_before) == 6
    child = grove.dispatch(root.uuid, "/fork").data["child"]
    assert [m.id for m in grove.history(child)] == parent_before
    assert grove.ask(root.uuid, "after the fork").ok
    assert [m.id for m in grove.history(child)] == parent_before
    assert grove.ask(child, "child's own").ok
    child_history = grove.history(child)
    assert [m.id for m in child_history[:6]] == parent_before
    assert [m.content for m in child_history[6:7]] == ["child's own"]
    assert grove.dispatch(root.uuid, f"/switch {child}").ok
    grandchild = grove.dispatch(root.uuid, "/fork").data["child"]
    assert [m.id for m in grove.history(grandchild)] == [m.id for m in child_history]
    record = grove.agent(grandchild)
    assert record.parent_uuid == child and record.fork_message_id == child_history[-1].id
    # `/agents` counts each agent's own messages: 8 for the root, 2 for the child, none yet
    # for the grandchild (what they inherit is not theirs).
    tree = grove.dispatch(root.uuid, "/agents").text.splitlines()
    assert [line.split()[-4:-2] for line in tree] == [
        ["8", "messages"],
        ["2", "messages"],
        ["0", "messages"],
    ]


def test_no_model_configured_sends_and_saves_nothing(grove: Grove) -> None:
    root = grove.create_root(None)
    with pytest.raises(CommandError) as info:
        grove.send(root.uuid, "Hello!")
    assert str(info.value) == NO_MODEL_TEXT
    assert grove.history(root.uuid) == []


def test_process_isolation_gives_an_agent_a_host_of_its_own(grove: Grove) -> None:
    shared = grove.create_root("gpt-6.1-terra")
    solos = [grove.create_root("gpt-6.1-terra", isolation="process") for _ in range(2)]
    for agent in (shared, *solos):
        assert grove.ask(agent.uuid, "hello").ok
    shared_identity = grove.provider_identity(shared.uuid)
    solo_identities = [grove.provider_identity(agent.uuid) for agent in solos]
    assert [identity["host"] for identity in solo_identities] == [f"solo-{a.uuid}" for a in solos]
    pids = {shared_identity["pid"], *(identity["pid"] for identity in solo_identities)}
    assert len(pids) == 3


def test_fork_many_starts_every_child_on_every_host_with_the_shared_prefix(
    grove: Grove,
) -> None:
    root = grove.create_root("claude-haiku-4-5")
    assert grove.ask(root.uuid, "shared context").ok
    prefix = [m.id for m in grove.history(root.uuid)]
    prompts = [f"task {index}" for index in range(30)]
    children = grove.fork_many(root.uuid, prompts, model="gpt-6-luna/low")
    assert len(children) == len(set(children)) == 30
    pending, finished = set(children), {}
    while pending:
        done = grove.wait_any(sorted(pending), 60)
        assert done, "no child finished within 60 s"
        finished.update(done)
        pending -= done.keys()
    assert all(result is not None and result.ok for result in finished.values())
    for child, prompt in zip(children, prompts, strict=True):
        history = grove.history(child)
        assert [m.id for m in history[:2]] == prefix
        assert [(m.kind, m.content) for m in history[2:3]] == [("user", prompt)]
        assert [m.kind for m in history[3:]] == ["assistant"]
        record = grove.agent(child)
        assert (record.provider, record.model, record.thinking_level) == (
            "openai",
            "gpt-6-luna",
            "low",
        )
    hosts = {grove.provider_identity(child)["host"] for child in children}
    assert hosts == {f"host-{index}" for index in range(HOSTS)}


def test_model_switch_fails_fast_when_the_conversation_does_not_fit(grove: Grove) -> None:
    root = grove.create_root("gemini-3.8-flash")
    grove.seed(root.uuid, [("user", "word " * 200_000), ("assistant", "noted")])
    refused = grove.dispatch(root.uuid, "/model claude-haiku-4-5")
    assert not refused.ok
    assert refused.text == (
        "claude-haiku-4-5 holds 200,000 tokens of context; this conversation needs about "
        "250,010. Run /compact first"
    )
    assert grove.agent(root.uuid).model == "gemini-3.8-flash"
    assert grove.dispatch(root.uuid, "/model gemini-3.1-pro-preview").ok


def test_hosts_and_supervisor_run_with_the_tuned_collector(grove: Grove) -> None:
    def thresholds(_actor: object) -> tuple[int, ...]:
        import gc

        return gc.get_threshold()

    hosts = [grove.supervisor.host.remote(f"host-{index}") for index in range(HOSTS)]
    actors = [grove.supervisor, *ray.get(hosts, timeout=60)]
    found = ray.get([actor.__ray_call__.remote(thresholds) for actor in actors], timeout=60)
    assert found == [THRESHOLDS] * (HOSTS + 1)


def test_a_streamed_turn_arrives_whole_in_coalesced_chunks(grove: Grove) -> None:
    root = grove.create_root("claude-haiku-4-5")
    turn = grove.send(root.uuid, "[[sim tokens=400 tps=2000]] a long answer, please")
    chunks = list(turn)
    result = turn.result()
    assert result.ok and len(result.text.split()) == 400
    assert "".join(text for kind, text in chunks if kind == "text") == result.text
    assert len(chunks) < 100  # 400 deltas, read in runs of what arrived together
