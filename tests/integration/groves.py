"""One way for integration tests to run Grove: a temp store, no user config, the simulator.

Each test module gets its own Grove (and so its own supervisor) with the settings it needs.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest

from supervisor import Grove
from supervisor.config import load_settings


@contextmanager
def running_grove(
    base: Path,
    *,
    hosts: int = 2,
    env: Mapping[str, str] | None = None,
    store_url: str | None = None,
) -> Iterator[Grove]:
    """Grove on the simulator with a store in `base` (unless `store_url`), `GROVE_*`
    settings from `env`, and no config file of the user's."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GROVE_CONFIG_FILE", str(base / "none.toml"))
        for name, value in (env or {}).items():
            patch.setenv(name, value)
        settings = load_settings(store=store_url or f"sqlite:///{base / 'grove.sqlite3'}")
    with Grove(settings=settings, simulate=True, hosts=hosts) as grove:
        yield grove
