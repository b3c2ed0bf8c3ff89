"""Price tiers per agent (SPEC 20) through a Grove on real Ray and the simulator over HTTP: a
root's tier on every request it sends, kept by its forks unless they name their own; flex on
Anthropic recorded as batch and said once; an unknown tier refused before anything is stored;
`--tier` and `[defaults] tier` on the command line; `grove usage --by tier`; the tier marked
in `grove agents` and `/agents` unless standard; the same through the service (RemoteGrove).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from grove.providers.base import Usage
from grove.providers.errors import GroveError
from grove.providers.http import Endpoint
from grove.providers.pricing import cost_usd
from grove.server.client import RemoteGrove
from grove.simulator import SimulatorConfig, SimulatorThread
from grove.supervisor import AsyncGrove, Grove
from grove.supervisor.agent_tiers import tier_of
from grove.supervisor.batch.tasks import Task
from grove.supervisor.store import open_store
from grove.supervisor.usage import usage_report
from tests.integration.groves import cli_environment, invoke, running_grove
from tests.integration.services import TIMEOUT_S, Service, service_in_process

KEY = "sim-tiers-key-8830"
GPT = "gpt-5-mini"


@pytest.fixture(scope="module")
def simulator() -> Iterator[SimulatorThread]:
    with SimulatorThread(SimulatorConfig(api_key=KEY, tokens=6)) as running:
        yield running


@pytest.fixture(scope="module")
def grove(simulator: SimulatorThread, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Grove]:
    endpoint = Endpoint(base_url=simulator.base_url, api_key=KEY)
    window = {"GROVE_TIERS__BATCH_WINDOW_S": "0.2"}  # a batch-tier step waits little
    with running_grove(
        tmp_path_factory.mktemp("tiers"), hosts=1, endpoint=endpoint, env=window
    ) as grove:
        yield grove


def sent_tier(simulator: SimulatorThread, marker: str) -> list[Any]:
    """The flex field of each request the simulator received whose last input item (a new
    prompt: a child's requests hold its parent's too) holds `marker`."""
    return [
        body.get("service_tier")
        for body in list(simulator.simulator.received)
        if marker in json.dumps((body.get("input") or body.get("messages") or [None])[-1])
    ]


def tier(grove: Grove, agent: str) -> str:
    return str(grove.agent(agent).metadata.get("tier", "standard"))


def answered(grove: Grove, children: list[str]) -> None:
    for child in children:
        result = grove.wait_turn(child, TIMEOUT_S)
        assert result is not None and result.ok, result


def test_a_flex_root_sends_flex_and_its_forks_keep_it_unless_they_name_their_own(
    grove: Grove, simulator: SimulatorThread
) -> None:
    root = grove.create_root(GPT, tier="flex").uuid
    assert tier(grove, root) == "flex"
    assert grove.ask(root, "root-flex-1").ok
    kept = grove.fork_many(root, ["kept-flex-1", "kept-flex-2"])
    own = grove.fork_many(root, ["own-standard-1"], tier="standard")
    answered(grove, kept + own)
    assert [tier(grove, child) for child in kept + own] == ["flex", "flex", "standard"]
    assert sent_tier(simulator, "root-flex-1") == ["flex"]
    assert sent_tier(simulator, "kept-flex-1") + sent_tier(simulator, "kept-flex-2") == [
        "flex",
        "flex",
    ]
    assert sent_tier(simulator, "own-standard-1") == [None]
    single = grove.fork(root, None, tier="standard")
    assert tier(grove, single) == "standard" and tier(grove, grove.fork(root)) == "flex"
    store = open_store(grove.settings.store)
    try:
        tree = [store.get_agent(uuid) for uuid in [root, *kept, *own]]
        report = usage_report(store, [agent for agent in tree if agent is not None], by="tier")
    finally:
        store.close()
    flex, standard = report.rows["flex"], report.rows["standard"]
    assert (flex.requests, standard.requests) == (3, 1)
    # flex is billed at half the standard price: the tier saved as much as it cost
    assert flex.cost_usd > 0 and flex.tier_saved_usd == pytest.approx(flex.cost_usd)
    assert standard.cost_usd > 0 and standard.tier_saved_usd == 0


def test_flex_on_anthropic_is_recorded_as_batch_and_said_once(
    grove: Grove, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="grove"):
        roots = [grove.create_root("claude-haiku-4-5", tier="flex").uuid for _ in range(2)]
        flex_root = grove.create_root(GPT, tier="flex").uuid
        child = grove.fork(flex_root, None, "claude-haiku-4-5")
    assert [tier(grove, agent) for agent in [*roots, child]] == ["batch"] * 3
    said = [r.getMessage() for r in caplog.records if "has no flex tier" in r.getMessage()]
    assert said == [
        "anthropic has no flex tier: claude-haiku-4-5 runs on the batch tier instead "
        "(the same half price; each step waits for its batch)"
    ]
    answer = grove.ask(roots[0], "anthropic-flex")
    assert answer.ok, answer.error
    (reply,) = [m for m in grove.history(roots[0]) if m.kind == "assistant"]
    standard = cost_usd("claude-haiku-4-5", Usage(**reply.data["usage"]))
    assert reply.data["tier"] == "batch" and reply.data["cost_usd"] == pytest.approx(standard / 2)
    switched = grove.dispatch(flex_root, "/model claude-haiku-4-5")
    assert switched.ok and "claude-haiku-4-5 runs on the batch tier instead" in switched.text
    assert tier_of(grove.agent(flex_root)) == "batch"  # what its requests go on now
    replaced = [event for event in grove_events(grove) if event["kind"] == "TierReplaced"]
    told = [agent for event in replaced for agent in event["payload"]["agents"]]
    assert [*roots, child] == [agent for agent in told if agent in (*roots, child)]


async def test_async_grove_takes_the_tier_too(grove: Grove, simulator: SimulatorThread) -> None:
    aio = AsyncGrove(grove)
    root = (await aio.create_root(GPT, tier="flex")).uuid
    assert (await aio.ask(root, "async-flex")).ok
    (child,) = await aio.fork_many(root, ["async-own"], tier="standard")
    answered(grove, [child])
    forked = await aio.fork(root, None, tier="standard")
    assert [tier(grove, agent) for agent in (root, child, forked)] == [
        "flex",
        "standard",
        "standard",
    ]
    assert sent_tier(simulator, "async-flex") == ["flex"]
    assert sent_tier(simulator, "async-own") == [None]


def grove_events(grove: Grove) -> list[dict[str, Any]]:
    store = open_store(grove.settings.store)
    try:
        return [event.model_dump() for event in store.events(0, 100_000)]
    finally:
        store.close()


def test_an_unknown_tier_is_refused_before_anything_is_stored(grove: Grove) -> None:
    root = grove.create_root(GPT).uuid
    before = len(grove_agents(grove))
    for attempt in (
        lambda: grove.create_root(GPT, tier="cheap"),
        lambda: grove.fork_many(root, ["never sent"], tier="cheap"),
        lambda: grove.fork(root, "never sent", tier="cheap"),
    ):
        with pytest.raises(GroveError, match="unknown tier 'cheap': the tiers are standard, flex"):
            attempt()
    assert len(grove_agents(grove)) == before


def grove_agents(grove: Grove) -> list[Any]:
    store = open_store(grove.settings.store)
    try:
        return store.list_agents(include_ended=True)
    finally:
        store.close()


def test_the_command_line_takes_a_tier_and_the_configs_default(
    grove: Grove, simulator: SimulatorThread, tmp_path: Path
) -> None:
    env = {**cli_environment(tmp_path), "GROVE_STORE": grove.settings.store or ""}
    flagged = invoke(env, "run", "--simulate", "-m", GPT, "--tier", "flex", "cli-run-flex")
    assert flagged.returncode == 0, flagged.stderr
    chat = invoke(env, "chat", "--simulate", "-m", GPT, "--tier", "flex", stdin="cli-chat-flex\n")
    assert chat.returncode == 0, chat.stderr
    tasks = tmp_path / "tasks.jsonl"
    lines = [
        {"id": 1, "prompt": "cli-batch-flex"},
        {"id": 2, "prompt": "cli-batch-own", "tier": "standard"},
    ]
    tasks.write_text("".join(json.dumps(line) + "\n" for line in lines))
    batch = invoke(env, "batch", str(tasks), "--simulate", "-m", GPT, "--tier", "flex")
    assert batch.returncode == 0, batch.stdout + batch.stderr
    bad = invoke(env, "run", "--simulate", "-m", GPT, "--tier", "cheap", "never sent")
    assert bad.returncode == 2 and "--tier: unknown tier 'cheap': the tiers are" in bad.stderr
    (tmp_path / "config.toml").write_text('[defaults]\ntier = "flex"\n')
    configured = invoke(env, "run", "--simulate", "-m", GPT, "cli-config-flex")
    assert configured.returncode == 0, configured.stderr
    sent = {
        marker: sent_tier(simulator, marker)
        for marker in ("cli-run-flex", "cli-chat-flex", "cli-batch-flex", "cli-config-flex")
    }
    assert sent == {marker: ["flex"] for marker in sent}
    assert sent_tier(simulator, "cli-batch-own") == [None]
    assert sent_tier(simulator, "never sent") == []
    usage = invoke(env, "usage", "--by", "tier", "--json")
    assert usage.returncode == 0, usage.stderr
    flex = json.loads(usage.stdout)["rows"]["flex"]
    assert flex["tier_saved_usd"] == pytest.approx(flex["cost_usd"]) and flex["cost_usd"] > 0
    assert "tier $" in invoke(env, "usage", "--by", "tier").stdout.splitlines()[0]
    for command in ("run", "chat", "batch"):
        shown = " ".join(invoke(env, command, "--help").stdout.split())
        assert "--tier" in shown and "flex: half price on the ordinary endpoint" in shown


def test_listings_mark_a_tier_other_than_standard(grove: Grove, tmp_path: Path) -> None:
    flex = grove.create_root(GPT, tier="flex").uuid
    child = grove.fork(flex, tier="standard")
    plain = grove.create_root(GPT).uuid
    env = {**cli_environment(tmp_path), "GROVE_STORE": grove.settings.store or ""}
    listed = invoke(env, "agents")
    assert listed.returncode == 0, listed.stderr
    lines = {line.split()[0]: line for line in listed.stdout.splitlines()}
    assert f"openai/{GPT}/default flex  " in lines[flex]
    for standard in (child, plain):
        assert f"openai/{GPT}/default  " in lines[standard] and "flex" not in lines[standard]
    rows = json.loads(invoke(env, "agents", "--json").stdout)
    tiers = {row["uuid"]: row["tier"] for row in rows}
    assert (tiers[flex], tiers[child], tiers[plain]) == ("flex", "standard", "standard")
    tree = grove.dispatch(flex, "/agents").text.splitlines()
    assert f"openai/{GPT}/default flex  idle" in tree[0] and flex in tree[0]
    assert f"openai/{GPT}/default  idle" in tree[1] and child in tree[1]


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory, grove: Grove) -> Iterator[Service]:
    with service_in_process(grove, tmp_path_factory.mktemp("served")) as running:
        yield running


def test_the_service_gives_the_same(
    grove: Grove,
    simulator: SimulatorThread,
    service: Service,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", service.env["XDG_CONFIG_HOME"])
    with RemoteGrove.running() as remote, caplog.at_level(logging.WARNING, logger="grove"):
        root = remote.create_root(GPT, tier="flex").uuid
        assert remote.agent(root).metadata["tier"] == "flex"
        assert remote.ask(root, "remote-flex").ok
        kept = remote.fork_many(root, ["remote-kept"])
        (own,) = remote.fork_many(root, ["remote-own"], tier="standard")
        answered(grove, [*kept, own])
        assert [remote.agent(child).metadata["tier"] for child in [*kept, own]] == [
            "flex",
            "standard",
        ]
        plain = remote.create_root(GPT).uuid
        tasks = [
            Task(id=1, key="1", line=1, prompt="remote-batch-flex"),
            Task(id=2, key="2", line=2, prompt="remote-batch-own", tier="standard"),
        ]
        steps = remote.run_batch(plain, tasks, key="remote-tiers", tier="flex")
        assert [step["status"] for step in steps if step is not None] == ["ok", "ok"]
        claude = remote.create_root("claude-sonnet-4-6", tier="flex").uuid
        assert remote.agent(claude).metadata["tier"] == "batch"
        with pytest.raises(GroveError, match="flex"):
            remote.create_root(GPT, tier="cheap")
    assert sent_tier(simulator, "remote-flex") + sent_tier(simulator, "remote-kept") == [
        "flex",
        "flex",
    ]
    assert sent_tier(simulator, "remote-own") == [None]
    assert sent_tier(simulator, "remote-batch-flex") == ["flex"]
    assert sent_tier(simulator, "remote-batch-own") == [None]
    assert any("claude-sonnet-4-6 runs on the batch tier" in r.getMessage() for r in caplog.records)
