"""Usage reports over a real store: `/usage` for a session's tree and `grove usage` for the
whole store; per agent, model, provider and day; each tree's total; totals equal the sum of
what the store's messages recorded."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from grove.supervisor import Grove
from grove.supervisor.store import open_store
from tests.integration.groves import Invoked, cli_environment, invoke, running_grove

FIELDS = ("input_tokens", "output_tokens", "thinking_tokens", "cache_read_tokens")


@pytest.fixture(scope="module")
def grove(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Grove]:
    env = {"GROVE_COMPACTION__KEEP_RECENT_TOKENS": "50", "GROVE_COMPACTION__ENABLED": "false"}
    with running_grove(tmp_path_factory.mktemp("usage"), hosts=1, env=env) as grove:
        yield grove


@pytest.fixture(scope="module")
def trees(grove: Grove) -> tuple[str, str]:
    """Two roots: one with two children and a compaction, one on another provider."""
    first = grove.create_root("claude-haiku-4-5").uuid
    for n in range(2):
        assert grove.ask(first, f"[[sim tokens=30]] step {n} " + "words " * 40).ok
    for child in grove.fork_many(first, ["[[sim tokens=12]] a", "[[sim tokens=18]] b"]):
        result = grove.wait_any([child], 60)[child]
        assert result is not None and result.ok
    assert grove.dispatch(first, '/compact [[sim reply="S"]]').ok
    second = grove.create_root("gpt-6.1-terra").uuid
    assert grove.ask(second, "[[sim tokens=9]] hello").ok
    return first, second


def stored_sum(grove: Grove) -> dict[str, Any]:
    """What every stored reply and summary recorded, summed straight from the store."""
    store = open_store(grove.settings.store)
    try:
        sums: dict[str, Any] = {name: 0 for name in FIELDS} | {"requests": 0, "cost_usd": 0.0}
        for agent in store.list_agents(include_ended=True):
            for message in store.agent_messages(agent.uuid):
                if message.kind in ("assistant", "compaction") and message.data:
                    sums["requests"] += 1
                    for name in FIELDS:
                        sums[name] += message.data["usage"][name]
                    sums["cost_usd"] += message.data["cost_usd"]
        return sums
    finally:
        store.close()


def grove_usage(grove: Grove, tmp_path: Path, *options: str) -> Invoked:
    """`grove usage OPTIONS` in this process, over the store of the module's Grove."""
    env = {**cli_environment(tmp_path), "GROVE_STORE": str(grove.settings.store)}
    return invoke(env, "usage", *options)


def test_the_session_report_covers_its_tree_and_sums_its_rows(
    grove: Grove, trees: tuple[str, str]
) -> None:
    first, second = trees
    outcome = grove.dispatch(first, "/usage")
    assert outcome.ok, outcome.text
    report = outcome.data
    assert len(report["rows"]) == 3 and second not in report["rows"]  # the root, two children
    (tree,) = report["trees"].values()
    for name in ("requests", *FIELDS):
        assert tree[name] == sum(row[name] for row in report["rows"].values())
    assert min(tree["requests"], tree["input_tokens"], tree["output_tokens"]) > 0
    assert report["rows"][first]["requests"] == 3  # two replies and the compaction's summary
    assert tree["seconds"] > 0
    assert outcome.text.splitlines()[-1].startswith("total")


def test_grove_usage_totals_equal_the_sum_over_the_store(
    grove: Grove, trees: tuple[str, str], tmp_path: Path
) -> None:
    expected = stored_sum(grove)
    for by in ("agent", "model", "provider", "day"):
        shown = grove_usage(grove, tmp_path, "--by", by, "--json")
        assert shown.returncode == 0, shown.stderr
        report = json.loads(shown.stdout)
        total = report["total"]
        assert {name: total[name] for name in expected} == pytest.approx(expected, abs=1e-6)
        for name in ("requests", *FIELDS):
            assert sum(row[name] for row in report["rows"].values()) == total[name]
    by_provider = json.loads(grove_usage(grove, tmp_path, "--by", "provider", "--json").stdout)
    assert {"anthropic", "openai"} <= set(by_provider["rows"])
    table = grove_usage(grove, tmp_path, "--by", "model")
    assert "anthropic/claude-haiku-4-5" in table.stdout and "openai/gpt-6.1-terra" in table.stdout


def test_an_agent_and_its_descendants_only(
    grove: Grove, trees: tuple[str, str], tmp_path: Path
) -> None:
    second = trees[1]
    shown = grove_usage(grove, tmp_path, "--agent", second[:8], "--json")
    assert shown.returncode == 0, shown.stderr
    assert list(json.loads(shown.stdout)["rows"]) == [second]


def test_bad_options_are_precise_errors(grove: Grove, tmp_path: Path) -> None:
    week = grove_usage(grove, tmp_path, "--by", "week")
    assert week.returncode == 2 and "'week' is not one of" in week.stderr
    nobody = grove_usage(grove, tmp_path, "--agent", "ffffffff-no-such-agent")
    assert nobody.returncode == 1 and "ffffffff-no-such-agent" in nobody.stderr
    assert not grove.dispatch(grove.create_root("claude-haiku-4-5").uuid, "/usage --by week").ok
