"""Usage counted once when a host dies mid-turn: a turn's first request was billed, then its
host was killed while a tool ran; the turn resumes on a new host from that stored reply (it is
not sent again), and the store's usage equals what the simulator billed, request for request."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from providers.http import Endpoint
from providers.simulator import SimulatorConfig, SimulatorThread
from supervisor import Grove
from supervisor.store import open_store
from supervisor.usage import subtree, usage_report
from tests.integration.groves import running_grove
from tests.integration.host_kills import finish_all, kill_host

KEY = "sim-billed-once-41aa"


def nap() -> str:
    """Take a short nap."""
    time.sleep(3)
    return "rested"


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[tuple[Grove, SimulatorThread]]:
    with (
        SimulatorThread(SimulatorConfig(api_key=KEY, tokens=4)) as simulator,
        running_grove(
            tmp_path,
            endpoint=Endpoint(base_url=simulator.base_url, api_key=KEY),
        ) as grove,
    ):
        yield grove, simulator


def test_a_request_billed_before_its_host_died_is_counted_once(
    setup: tuple[Grove, SimulatorThread],
) -> None:
    grove, simulator = setup
    root = grove.create_root("claude-haiku-4-5", tools=[nap]).uuid
    (child,) = grove.fork_many(root, ["[[sim tool=nap args='{}' step=1]] rest first"])
    time.sleep(1.5)  # the first request is answered and billed; the nap is under way
    assert simulator.simulator.billed["requests"] == 1
    kill_host(grove, grove.provider_identity(child)["host"])
    (result,) = finish_all(grove, [child]).values()
    assert result is not None and result.ok
    store = open_store(grove.settings.store)
    try:
        kinds = [m.kind for m in store.agent_messages(child)]
        record = store.get_agent(root)
        assert record is not None
        recorded = usage_report(store, subtree(store, record)).total
    finally:
        store.close()
    assert kinds == ["user", "assistant", "tool_result", "assistant"]
    billed = simulator.simulator.billed
    assert billed["requests"] == 2  # the reply calling nap was stored, not asked again
    assert (recorded.requests, recorded.input_tokens, recorded.output_tokens) == (
        billed["requests"],
        billed["input_tokens"],
        billed["output_tokens"],
    )
