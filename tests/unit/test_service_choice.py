"""Which Grove a command takes with a service recorded (its record read from a real config
directory), --no-service among the global options, what counts as a client of the service,
and how its idle stop is spoken of.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from grove.cli.app import hoisted
from grove.cli.context import CliContext
from grove.cli.service_process import idle_text
from grove.server.files import ServiceState, read_state, state_path, write_state
from grove.server.idle import Clients, counts
from grove.server.wire import OBSERVER_HEADER


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    return tmp_path / "grove"


def recorded(config: Path, simulate: bool = False, hosts: int | None = None) -> None:
    """A service recorded as started so, its pid this process's (so it counts as alive)."""
    state = ServiceState(os.getpid(), "127.0.0.1", 9, time.time(), simulate, hosts)
    write_state(state, config)


def url(context: CliContext, simulate: bool = False, hosts: int | None = None) -> str | None:
    remote = context.remote(simulate=simulate, hosts=hosts)
    if remote is None:
        return None
    remote.close()
    return remote.url


def test_a_plain_command_takes_any_service_and_no_service_takes_none(config: Path) -> None:
    assert url(CliContext()) is None  # none recorded
    recorded(config, True, 3)
    assert url(CliContext()) == "http://127.0.0.1:9"
    assert url(CliContext(no_service=True)) is None
    assert url(CliContext(store="sqlite:///x", own=True)) is None


Way = tuple[bool, int | None]  # --simulate, --hosts


@pytest.mark.parametrize(
    ("started", "asked", "taken"),
    [
        ((False, None), (True, None), False),  # --simulate beside one on the real providers
        ((True, None), (True, None), True),  # grove up --simulate
        ((False, None), (False, 2), False),
        ((False, 2), (False, 2), True),  # grove up --hosts 2
        ((False, 2), (False, 3), False),
        ((True, None), (True, 2), False),
    ],
)
def test_simulate_and_hosts_take_only_a_service_started_the_same_way(
    config: Path, started: Way, asked: Way, taken: bool
) -> None:
    recorded(config, *started)
    assert (url(CliContext(), *asked) is not None) == taken


def test_a_record_without_how_it_was_started_is_a_grove_up_one(config: Path) -> None:
    path = state_path(config)
    path.parent.mkdir(parents=True)
    old = {"pid": os.getpid(), "host": "127.0.0.1", "port": 9, "started": 1.0}
    path.write_text(json.dumps(old))
    state = read_state(config)
    assert state is not None
    assert (state.simulate, state.hosts, state.autostarted, state.idle_stop_s) == (
        False,
        None,
        False,
        None,
    )


def test_no_service_moves_before_the_command_alone() -> None:
    assert hoisted(["run", "--no-service", "hi"]) == ["--no-service", "run", "hi"]
    given = ["agents", "--no-service", "--store", "s"]
    assert hoisted(given) == ["--no-service", "--store", "s", "agents"]
    assert hoisted(["run", "--", "--no-service"]) == ["run", "--", "--no-service"]


def scope(path: str, *headers: tuple[bytes, bytes]) -> dict[str, Any]:
    return {"type": "http", "path": path, "headers": list(headers)}


def test_healthz_and_an_observer_are_no_clients() -> None:
    assert counts(scope("/api/agents"))
    assert counts(scope("/api/presence/stream"))
    assert not counts(scope("/healthz"))
    observed = scope("/api/agents", (OBSERVER_HEADER.encode(), b"1"))
    assert not counts(observed)


def test_idle_time_counts_from_the_last_request_and_is_none_while_one_is_open() -> None:
    clients = Clients(last_seen=time.monotonic() - 30)
    assert 30 <= clients.idle_s() < 60
    clients.open = 1
    assert clients.idle_s() == 0
    assert clients.activity() == {"clients": 1, "requests": 0, "idle_s": 0.0, "running": 0}


def test_the_idle_stop_is_said_in_minutes_when_it_is_whole_minutes() -> None:
    assert idle_text(900) == "15 minutes"
    assert idle_text(60) == "1 minute"
    assert idle_text(90) == "90 s"
    assert idle_text(2.5) == "2.5 s"
