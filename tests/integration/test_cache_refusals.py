"""Servers that refuse a cache feature (a compatible server without `cache_control` or
`prompt_cache_key`, a Gemini model without explicit caching): Grove drops that feature for
that server with one warning and goes on. And `[cache] enabled = false` sends none of them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from grove.providers.http import Endpoint
from grove.simulator import SimulatorConfig, SimulatorThread
from grove.simulator.config import CACHE_FEATURES
from grove.supervisor import Grove
from grove.supervisor.store import open_store
from tests.integration.groves import cli_environment, invoke, running_grove

KEY = "sim-refusing-key-2407"
CONTEXT = " ".join(f"fact-{n}" for n in range(1_500))


@pytest.fixture(scope="module")
def simulator() -> Iterator[SimulatorThread]:
    config = SimulatorConfig(api_key=KEY, tokens=3, refuse=frozenset(CACHE_FEATURES))
    with SimulatorThread(config) as running:
        yield running


@pytest.fixture(scope="module")
def grove(simulator: SimulatorThread, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Grove]:
    endpoint = Endpoint(base_url=simulator.base_url, api_key=KEY)
    with running_grove(tmp_path_factory.mktemp("refusals"), hosts=1, endpoint=endpoint) as grove:
        yield grove


def forked_notices(grove: Grove, model: str, prompts: list[str]) -> list[list[str]]:
    """`/fork` a child of a root holding a long context once per prompt; the notices each
    child's turn showed."""
    root = grove.create_root(model).uuid
    grove.seed(root, [("user", CONTEXT), ("assistant", "Noted.")])
    notices = []
    for prompt in prompts:
        outcome = grove.dispatch(root, f'/fork "{prompt}"')
        assert outcome.ok, outcome.text
        turn = grove.command_turn(outcome)
        assert turn is not None
        notices.append([text for kind, text in turn if kind == "notice"])
        assert turn.result().ok
        grove.dispatch(root, f"/focus {root}")
    return notices


@pytest.mark.parametrize(
    ("model", "feature"),
    [("claude-sonnet-4-6", "cache_control"), ("gpt-5-mini", "prompt_cache_key")],
)
def test_a_refused_feature_is_dropped_with_one_warning(
    grove: Grove, simulator: SimulatorThread, model: str, feature: str
) -> None:
    first, second = forked_notices(grove, model, ["first task", "second task"])
    assert len(first) == 1 and f"refused {feature}" in first[0]
    assert second == []  # told once; the feature is not sent again
    latest = list(simulator.simulator.received)[-1]
    assert feature not in json.dumps(latest)


def test_a_model_without_explicit_caching_falls_back_to_implicit(
    grove: Grove, simulator: SimulatorThread
) -> None:
    root = grove.create_root("gemini-3.5-flash").uuid
    grove.seed(root, [("user", CONTEXT), ("assistant", "Noted.")])
    children = grove.fork_many(root, ["one", "two", "three"])
    results = {child: grove.wait_any([child], 60)[child] for child in children}
    assert all(result is not None and result.ok for result in results.values())
    assert simulator.simulator.explicit.created == 0
    reads = sorted(r.usage.cache_read_tokens for r in results.values() if r is not None)
    assert reads[0] == 0 and reads[1] > 1_000  # Gemini's implicit cache, warmed by the first
    store = open_store(grove.settings.store)
    try:
        dropped = [e for e in store.events(limit=100_000) if e.kind == "CacheFeatureDropped"]
    finally:
        store.close()
    assert len(dropped) == 1 and dropped[0].payload["feature"] == "cachedContents"
    assert "not supported for createCachedContent" in dropped[0].payload["error"]


def test_caching_can_be_turned_off(tmp_path: Path) -> None:
    """`[cache] enabled = false`: a chat's second turn reads nothing from a cache."""
    env = {**cli_environment(tmp_path), "GROVE_CACHE__ENABLED": "false"}
    script = f"[[sim tokens=3]] {CONTEXT}\n[[sim tokens=3]] and again\n"
    chat = subprocess.run(
        [sys.executable, "-m", "grove.cli.app", "chat", "--simulate", "-m", "claude-sonnet-4-6"],
        input=script, capture_output=True, text=True, env=env, timeout=180, check=False,
    )  # fmt: skip
    assert chat.returncode == 0, chat.stderr
    usage = subprocess.run(
        [sys.executable, "-m", "grove.cli.app", "usage", "--json"],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    total = json.loads(usage.stdout)["total"]
    assert total["requests"] == 2 and total["input_tokens"] > 2 * 3_000
    assert (total["cache_read_tokens"], total["cache_write_tokens"]) == (0, 0)


def test_a_cache_setting_of_the_wrong_kind_is_one_line_and_exit_2(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    env = cli_environment(tmp_path, config)
    for table, problem in (('ttl = "2h"', "cache.ttl"), ('enabled = "perhaps"', "cache.enabled")):
        config.write_text(f"[cache]\n{table}\n")
        done = invoke(env, "usage")
        assert done.returncode == 2 and problem in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
