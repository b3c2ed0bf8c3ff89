"""Idle agents let go of their provider's connection pool and rebuild it on the next request.

Its own module: the Grove here must start its own supervisor with a short idle time.
"""

from __future__ import annotations

import time

import pytest

from supervisor import Grove
from supervisor.config import load_settings


def test_idle_agents_release_their_connection_pool(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    home = tmp_path_factory.mktemp("idle")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GROVE_CONFIG_FILE", str(home / "none.toml"))
        patch.setenv("GROVE_HOSTS__IDLE_RELEASE_S", "0.3")
        settings = load_settings(store=f"sqlite:///{home / 'grove.sqlite3'}")
    with Grove(settings=settings, simulate=True, hosts=1) as grove:
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
