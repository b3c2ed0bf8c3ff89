"""Idle agents let go of their provider's connection pool and rebuild it on the next request.

Its own module: the Grove here must start its own supervisor with a short idle time.
"""

from __future__ import annotations

import time
from pathlib import Path

from tests.integration.groves import running_grove


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
