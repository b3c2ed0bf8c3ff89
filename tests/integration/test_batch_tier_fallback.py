"""A step whose batch tries all end errored goes on the standard tier (`[tiers] batch_tries`),
end to end: the simulator errors every batched request; the agent's turn still answers,
streamed and billed (and held by its budget) at the standard price, after its tries on the
batch tier."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from grove.providers.base import Usage
from grove.providers.http import Endpoint
from grove.providers.pricing import cost_usd
from grove.simulator import SimulatorConfig, SimulatorThread
from grove.supervisor.budget_rules import Budget
from grove.supervisor.store import open_store
from tests.integration.groves import running_grove
from tests.integration.host_kills import events

KEY = "sk-batch-fallback-canary-9e13b0"
MODEL = "claude-haiku-4-5"
TRIES = 2
SETTINGS = {"GROVE_TIERS__BATCH_WINDOW_S": "0.3", "GROVE_TIERS__BATCH_TRIES": str(TRIES)}


@pytest.fixture
def simulator() -> Iterator[SimulatorThread]:
    config = SimulatorConfig(api_key=KEY, tokens=6, batch_delay_s=0.2, batch_errored=1.0)
    with SimulatorThread(config) as running:
        yield running


def test_a_step_whose_batch_tries_are_spent_goes_on_the_standard_tier(
    simulator: SimulatorThread, tmp_path: Path
) -> None:
    endpoint = Endpoint(base_url=simulator.base_url, api_key=KEY)
    store_url = f"sqlite:///{tmp_path / 'grove.sqlite3'}"
    with running_grove(tmp_path, endpoint=endpoint, env=SETTINGS, store_url=store_url) as grove:
        # Held at the batch price while on the batch tier, then at the standard price.
        agent = grove.create_root(MODEL, tier="batch", budget=Budget(cost_usd=1.0)).uuid
        result = grove.ask(agent, "answer me somehow")
        assert result.ok, result.error
        reply = grove.history(agent)[-1]
    usage = Usage(**reply.data["usage"])
    assert reply.data["cost_usd"] == cost_usd(MODEL, usage) > 0  # the standard price
    assert reply.data["tier"] == "standard"
    billed = simulator.simulator.billing.by_tier
    assert billed["standard"]["requests"] == 1
    assert "batch" not in billed or billed["batch"]["requests"] == 0  # errored: not billed
    store = open_store(store_url)
    try:
        assert len(events(store, "BatchSent")) == TRIES
        assert [e["why"] for e in events(store, "BatchRetried")] == ["errored"] * (TRIES - 1)
        (answered,) = events(store, "BatchAnswered")
        assert answered["outcome"] == "standard"
        assert not store.batch_steps.all()
    finally:
        store.close()
