"""A Grove stopped while its agent's step waits on a provider batch, and another started on the
same store (as a service is started again): the new supervisor polls the open batch instead of
sending it again, and the turn the stop cut off ends with its answer before the agent's next.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from grove.providers.http import Endpoint
from grove.simulator import SimulatorConfig, SimulatorThread
from grove.supervisor.store import Store, open_store
from tests.integration.groves import running_grove
from tests.integration.host_kills import events, wait_for_event

KEY = "sk-batch-restart-canary-41f0aa"
MODEL = "claude-haiku-4-5"
WINDOW = {"GROVE_TIERS__BATCH_WINDOW_S": "0.5"}
PROMPT = "a question asked before the stop"


@pytest.fixture
def simulator() -> Iterator[SimulatorThread]:
    config = SimulatorConfig(api_key=KEY, tokens=6, batch_delay_s=4.0)
    with SimulatorThread(config) as running:
        yield running


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'grove.sqlite3'}"


def batch_requests(simulator: SimulatorThread) -> int:
    return int(simulator.simulator.billing.by_tier.get("batch", {}).get("requests", 0))


def sent_requests(store: Store) -> int:
    return sum(int(str(sent["requests"])) for sent in events(store, "BatchSent"))


def test_a_grove_started_again_polls_the_batch_its_predecessor_left_open(
    simulator: SimulatorThread, store_url: str, tmp_path: Path
) -> None:
    endpoint = Endpoint(base_url=simulator.base_url, api_key=KEY)
    store = open_store(store_url)
    try:
        first = tmp_path / "first"
        first.mkdir()
        with running_grove(first, endpoint=endpoint, env=WINDOW, store_url=store_url) as grove:
            agent = grove.create_root(MODEL, tier="batch").uuid
            grove.send(agent, PROMPT)
            wait_for_event(store, "BatchSent", 1)
        (open_step,) = store.batch_steps.all()  # the Grove stopped with its batch open
        assert open_step.agent == agent and open_step.batch_id is not None
        second = tmp_path / "second"
        second.mkdir()
        with running_grove(second, endpoint=endpoint, env=WINDOW, store_url=store_url) as grove:
            after = grove.ask(agent, "and the next one")
            assert after.ok, after.error
            history = grove.history(agent)
        assert [(m.kind, m.content) for m in history][:1] == [("user", PROMPT)]
        assert [m.kind for m in history] == ["user", "assistant", "user", "assistant"]
        (resumed,) = events(store, "BatchesResumed")
        assert (resumed["batches"], resumed["steps"]) == (1, 1)
        assert sent_requests(store) == 2  # the cut-off step once, the next one once
        assert batch_requests(simulator) == 2
    finally:
        store.close()
