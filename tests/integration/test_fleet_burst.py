"""A burst over the fleet's buckets: with `[providers.anthropic] rpm` the supervisor's buckets
make every host's requests wait instead of earning 429s from a simulator enforcing the same
limit, where the same burst on a provider without them does earn 429s. A module of its own:
the burst starts on full buckets (the simulator's and the fleet's), so it waits only for the
few requests beyond them, not for a minute's refill.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from grove.simulator import SimulatorThread
from grove.supervisor import Grove
from tests.integration.test_fleet_limits import RPM, fleet

BURST = RPM + 6  # beyond either bucket


@pytest.fixture(scope="module")
def started(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SimulatorThread, Grove]]:
    with fleet(tmp_path_factory.mktemp("fleet-burst")) as both:
        yield both


def burst(grove: Grove, model: str) -> list[bool]:
    root = grove.create_root(model).uuid
    children = grove.fork_many(root, [f"task {n}" for n in range(BURST)])
    done = grove.wait_any(children, 120)
    while len(done) < len(children):
        done |= grove.wait_any([c for c in children if c not in done], 120)
    return [result is not None and result.ok for result in done.values()]


def test_requests_wait_for_the_fleets_buckets_instead_of_earning_429s(
    started: tuple[SimulatorThread, Grove],
) -> None:
    simulator, grove = started
    assert all(burst(grove, "claude-haiku-4-5"))
    assert simulator.simulator.rate_limited == 0  # not one 429
    # The same burst on a provider without fleet limits meets the simulator's limit: 429s,
    # retried by each agent on its own (some give up).
    burst(grove, "gpt-5-mini")
    assert simulator.simulator.rate_limited > 0
