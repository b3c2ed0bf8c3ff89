"""Idle agents let go of their provider's connection pool and rebuild it on the next request.

Its own module: each Grove here must start its own supervisor with its own idle settings.
"""

from __future__ import annotations

import time
from pathlib import Path

from grove.providers.http import Endpoint
from grove.simulator import SimulatorConfig, SimulatorThread
from tests.integration.groves import running_grove

KEY = "sim-idle-pools-key-5120"


def test_idle_agents_release_their_connection_pool(tmp_path: Path) -> None:
    env = {"GROVE_HOSTS__IDLE_RELEASE_S": "0.3"}
    with running_grove(tmp_path, hosts=1, env=env) as grove:
        root = grove.create_root("gpt-5-nano")
        assert grove.ask(root.uuid, "one").ok
        busy = grove.provider_identity(root.uuid)
        assert busy["client"] is not None
        deadline = time.monotonic() + 10
        while grove.provider_identity(root.uuid)["client"] is not None:
            assert time.monotonic() < deadline, "the pool was never released"
            time.sleep(0.1)
        assert grove.provider_identity(root.uuid)["provider"] == busy["provider"]
        assert grove.ask(root.uuid, "two").ok
        assert grove.provider_identity(root.uuid)["client"] is not None


def test_a_host_keeps_at_most_idle_pools_open(tmp_path: Path) -> None:
    """Beyond `[hosts] idle_pools`, the least recently used idle agents close their pools:
    the provider sees that many connections, however many agents have spoken."""
    with SimulatorThread(SimulatorConfig(api_key=KEY, tokens=2)) as simulator:
        endpoint = Endpoint(base_url=simulator.base_url, api_key=KEY)
        env = {"GROVE_HOSTS__IDLE_POOLS": "2"}
        with running_grove(tmp_path, hosts=1, env=env, endpoint=endpoint) as grove:
            roots = [grove.create_root("gpt-5-nano").uuid for _ in range(5)]
            for uuid in roots:
                assert grove.ask(uuid, "hello").ok
            held = [grove.provider_identity(uuid)["client"] is not None for uuid in roots]
            assert held == [False, False, False, True, True]
            deadline = time.monotonic() + 10
            while simulator.simulator.stats()["open_connections"] > 2:
                assert time.monotonic() < deadline, "the provider still sees the closed pools"
                time.sleep(0.05)
            assert grove.ask(roots[0], "again").ok  # rebuilt on use; now the oldest goes
            held = [grove.provider_identity(uuid)["client"] is not None for uuid in roots]
            assert held == [True, False, False, False, True]
