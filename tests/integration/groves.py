"""One way for integration tests to run Grove: a temp store, no user config, the simulator.

Each test module gets its own Grove (and so its own supervisor) with the settings it needs, in
the Ray its test process shares (tests/integration/shared_ray.py).
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from grove.cli.app import app
from grove.cli.context import NO_SERVICE_ENV
from grove.providers.http import Endpoint
from grove.providers.lifecycle import TODAY_ENV
from grove.supervisor import Grove
from grove.supervisor.config import load_settings
from grove.supervisor.store import open_store
from tests.integration.shared_ray import SHARED_RAY

REPO_ROOT = Path(__file__).resolve().parents[2]
# `[providers.retry]` for tests whose faults are not about the backoff: the same attempts,
# waits of at most 50 ms instead of 0.5 s doubling to 30 s.
FAST_RETRIES = {
    "GROVE_PROVIDERS__RETRY__BASE_DELAY_S": "0.01",
    "GROVE_PROVIDERS__RETRY__MAX_DELAY_S": "0.05",
}


@contextmanager
def running_grove(
    base: Path,
    *,
    hosts: int = 2,
    env: Mapping[str, str] | None = None,
    store_url: str | None = None,
    endpoint: Endpoint | None = None,
    simulate: bool = True,
) -> Iterator[Grove]:
    """Grove on the simulator (its own, or the one at `endpoint`; the real providers without
    `simulate`) with a store in `base` (unless `store_url`), `GROVE_*` settings from `env`, and
    no config file of the user's, in the shared Ray (a supervisor of its own unless one runs
    there: its maker stops it)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GROVE_CONFIG_FILE", str(base / "none.toml"))
        for name, value in (env or {}).items():
            patch.setenv(name, value)
        settings = load_settings(store=store_url or f"sqlite:///{base / 'grove.sqlite3'}")
    SHARED_RAY.ensure()
    with Grove(
        settings=settings, simulate=simulate and endpoint is None, endpoint=endpoint, hosts=hosts
    ) as grove:
        yield grove


def cli_environment(base: Path, config: Path | None = None) -> dict[str, str]:
    """The environment for running the `grove` command line in `base`: this one without Grove
    or Ray settings and provider keys, a store and config directory of its own, and no Grove
    service started in the background (GROVE_NO_SERVICE: see tests/conftest.py)."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key == TODAY_ENV  # the suite's day (tests/conftest.py)
        or (not key.startswith(("GROVE_", "RAY_")) and not key.endswith("_API_KEY"))
    }
    env.update(
        GROVE_STORE=f"sqlite:///{base / 'g.sqlite3'}",
        GROVE_CONFIG_FILE=str(config or base / "config.toml"),
        XDG_CONFIG_HOME=str(base / "config"),
        PYTHONPATH=str(REPO_ROOT),
    )
    env[NO_SERVICE_ENV] = "1"
    return env


@dataclass(frozen=True)
class Invoked:
    returncode: int
    stdout: str
    stderr: str


def invoke(env: Mapping[str, str], *args: str, stdin: str | None = None) -> Invoked:
    """`grove ARGS` in this process with `env`: with Ray started here (a module's Grove), the
    command joins its supervisor instead of starting Ray of its own."""
    result = CliRunner().invoke(app, list(args), input=stdin, env=env, catch_exceptions=False)
    return Invoked(result.exit_code, result.stdout, result.stderr)


@contextmanager
def streaming_beside(grove: Grove) -> Iterator[list[float]]:
    """A root of its own streams a reply (300 tokens at 100 a second) while the block runs:
    the times its deltas arrived, for the largest gap; the block's end waits for the reply."""
    streamer = grove.create_root("gpt-5-mini").uuid
    arrivals: list[float] = []

    def follow() -> None:
        for _ in grove.send(streamer, "[[sim tokens=300 tps=100]] stream on"):
            arrivals.append(time.monotonic())

    streaming = threading.Thread(target=follow)
    streaming.start()
    time.sleep(0.5)  # under way before the block starts
    try:
        yield arrivals
    finally:
        streaming.join(60)


def largest_gap(arrivals: list[float]) -> float:
    """The longest wait between two deltas (after at least a few of them arrived)."""
    assert len(arrivals) > 5, arrivals
    return max(later - earlier for earlier, later in itertools.pairwise(arrivals))


def sim_call(tool: str, **arguments: Any) -> str:
    """A prompt whose first reply calls `tool` with `arguments` (a simulator directive)."""
    return f"[[sim tool={tool} args='{json.dumps(arguments)}' step=1]] go"


def tool_results(grove: Grove, agent: str) -> list[dict[str, Any]]:
    """Every tool result part of an agent's history, in order."""
    return [
        part
        for message in grove.history(agent)
        if message.kind == "tool_result"
        for part in message.data["parts"]
    ]


def compactions(grove: Grove, agent: str) -> list[dict[str, Any]]:
    """The payloads of the agent's `Compacted` events, oldest first."""
    store = open_store(grove.settings.store)
    try:
        events = store.events(limit=10_000)
    finally:
        store.close()
    return [e.payload for e in events if e.kind == "Compacted" and e.payload["agent"] == agent]


def interrupt_after_lines(
    process: subprocess.Popen[str], output: Path, lines: int, timeout_s: float
) -> tuple[str, str]:
    """Ctrl+C a running `grove batch` once its output holds `lines` records (or after
    `timeout_s`); its stdout and stderr. Whatever happens, the process is gone after."""
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and process.poll() is None:
            if output.exists() and len(output.read_text().splitlines()) >= lines:
                break
            time.sleep(0.2)
        process.send_signal(signal.SIGINT)
        return process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
