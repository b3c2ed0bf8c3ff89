"""Rate limits for the fleet: with `[providers.anthropic] rpm` the supervisor's buckets hold
no more than the provider's rate-limit headers say is left; a 429 with retry-after that one agent
meets holds every agent on that provider (one shared cooldown, an event). (The burst that waits
for the buckets: test_fleet_burst.py, on full buckets of its own.)"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from grove.providers.http import Endpoint
from grove.simulator import SimulatorConfig, SimulatorThread
from grove.supervisor import Grove
from grove.supervisor.store import open_store
from tests.integration.groves import running_grove

KEY = "sim-fleet-key-5e0a"
RPM = 120  # a bucket of 120 requests, refilled at 2 a second


@contextmanager
def fleet(base: Path) -> Iterator[tuple[SimulatorThread, Grove]]:
    """A simulator enforcing RPM and a Grove whose anthropic buckets hold the same RPM, both
    with full buckets."""
    with SimulatorThread(SimulatorConfig(api_key=KEY, rpm=RPM, tokens=3)) as simulator:
        env = {"GROVE_PROVIDERS__ANTHROPIC__RPM": str(RPM)}
        endpoint = Endpoint(base_url=simulator.base_url, api_key=KEY)
        with running_grove(base, hosts=2, env=env, endpoint=endpoint) as grove:
            yield simulator, grove


@pytest.fixture(scope="module")
def started(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SimulatorThread, Grove]]:
    with fleet(tmp_path_factory.mktemp("fleet")) as both:
        yield both


@pytest.fixture(scope="module")
def simulator(started: tuple[SimulatorThread, Grove]) -> SimulatorThread:
    return started[0]


@pytest.fixture(scope="module")
def grove(started: tuple[SimulatorThread, Grove]) -> Grove:
    return started[1]


def rate_limited_events(grove: Grove) -> list[dict[str, Any]]:
    store = open_store(grove.settings.store)
    try:
        return [e.payload for e in store.events(limit=100_000) if e.kind == "RateLimited"]
    finally:
        store.close()


def test_a_429_holds_every_agent_on_that_provider(grove: Grove) -> None:
    # First in this module: the simulator's own bucket is still full.
    root = grove.create_root("claude-haiku-4-5").uuid
    result = grove.ask(root, "[[sim fault=429 retry_after=0.5 times=1]] once refused")
    assert result.ok
    (event,) = [e for e in rate_limited_events(grove) if e["agent"] == root]
    assert event["provider"] == "anthropic"
    assert 0.5 <= float(event["seconds"]) <= 0.75  # retry-after, and a little spread


def spend_outside_grove(simulator: SimulatorThread, leave: int) -> None:
    """Another client on the same key spends the simulator's bucket down to `leave` requests."""
    with httpx.Client(base_url=simulator.base_url, timeout=30) as client:
        while True:
            answer = client.post(
                "/v1/messages",
                headers={"x-api-key": KEY, "anthropic-version": "2023-06-01"},
                json={
                    "model": "claude-haiku-4-5",
                    "max_tokens": 16,
                    "messages": [{"role": "user", "content": "[[sim tokens=1]] spend"}],
                },
            )
            assert answer.status_code == 200, answer.text
            if int(answer.headers["anthropic-ratelimit-requests-remaining"]) <= leave:
                return


def test_the_buckets_shrink_to_what_the_providers_headers_say_is_left(
    grove: Grove, simulator: SimulatorThread
) -> None:
    spend_outside_grove(simulator, leave=4)
    before = simulator.simulator.rate_limited
    root = grove.create_root("claude-haiku-4-5").uuid
    # The fleet's buckets know nothing of the other client: they would let all 12 go at once.
    # After the first answer they hold no more than its headers say is left, and wait.
    for n in range(12):
        assert grove.ask(root, f"[[sim tokens=1]] one after another {n}").ok
    assert simulator.simulator.rate_limited == before  # not one 429
