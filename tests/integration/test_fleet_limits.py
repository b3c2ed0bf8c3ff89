"""Rate limits for the fleet: with `[providers.anthropic] rpm` the supervisor's buckets make
every host's requests wait instead of earning 429s from a simulator enforcing the same limit,
where the same burst on a provider without them does earn 429s; a 429 with retry-after that one
agent meets holds every agent on that provider (one shared cooldown, an event)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from providers.http import Endpoint
from providers.simulator import SimulatorConfig, SimulatorThread
from supervisor import Grove
from supervisor.store import open_store
from tests.integration.groves import running_grove

KEY = "sim-fleet-key-5e0a"
RPM = 120  # a bucket of 120 requests, refilled at 2 a second
BURST = RPM + 6


@pytest.fixture(scope="module")
def simulator() -> Iterator[SimulatorThread]:
    with SimulatorThread(SimulatorConfig(api_key=KEY, rpm=RPM, tokens=3)) as running:
        yield running


@pytest.fixture(scope="module")
def grove(tmp_path_factory: pytest.TempPathFactory, simulator: SimulatorThread) -> Iterator[Grove]:
    env = {"GROVE_PROVIDERS__ANTHROPIC__RPM": str(RPM)}
    endpoint = Endpoint(base_url=simulator.base_url, api_key=KEY)
    with running_grove(
        tmp_path_factory.mktemp("fleet"), hosts=2, env=env, endpoint=endpoint
    ) as grove:
        yield grove


def burst(grove: Grove, model: str) -> list[bool]:
    root = grove.create_root(model).uuid
    children = grove.fork_many(root, [f"task {n}" for n in range(BURST)])
    done = grove.wait_any(children, 120)
    while len(done) < len(children):
        done |= grove.wait_any([c for c in children if c not in done], 120)
    return [result is not None and result.ok for result in done.values()]


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


def test_requests_wait_for_the_fleets_buckets_instead_of_earning_429s(
    grove: Grove, simulator: SimulatorThread
) -> None:
    before = simulator.simulator.rate_limited
    assert all(burst(grove, "claude-haiku-4-5"))
    assert simulator.simulator.rate_limited == before  # not one 429
    # The same burst on a provider without fleet limits meets the simulator's limit: 429s,
    # retried by each agent on its own (some give up).
    burst(grove, "gpt-5-mini")
    assert simulator.simulator.rate_limited > before
