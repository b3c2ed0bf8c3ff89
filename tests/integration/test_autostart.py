"""A command that needs Ray and finds no service starts one in the background and uses it, as
a user's does: real `grove` processes, the service's Ray, and the provider simulator over HTTP.

Each test has a config directory of its own (where the service's record, lock and log live),
takes GROVE_NO_SERVICE away (tests/conftest.py sets it for the rest of the suite) and stops
its service with `grove down` in that environment. That the later commands went to the service
is read from the service itself (`grove status --json`: the requests it served), not timed.
"""

from __future__ import annotations

import fcntl
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from grove.cli.context import NO_SERVICE_ENV
from grove.server.client import RemoteGrove
from grove.server.files import process_alive, read_state
from grove.simulator.config import SimulatorConfig
from grove.simulator.runners import SimulatorThread
from tests.integration.groves import cli_environment

pytestmark = pytest.mark.own_ray  # the commands' Ray is the service's, or their own

KEY = "sim-autostart-key"
MODEL = "gpt-6.1-terra"
TIMEOUT_S = 240
STARTING = "Starting a Grove service in the background (stops after "
STOP_WAIT_S = 90.0


@pytest.fixture(scope="module")
def simulator() -> Iterator[SimulatorThread]:
    with SimulatorThread(SimulatorConfig(api_key=KEY, tokens=4)) as running:
        yield running


class Place:
    """A config directory and store of its own, with the environment of a user who has no
    service up: commands there may start one."""

    def __init__(self, base: Path, simulator: SimulatorThread, **settings: str) -> None:
        self.config = base / "config" / "grove"
        self.env = {
            **cli_environment(base),
            "OPENAI_BASE_URL": simulator.base_url,
            "OPENAI_API_KEY": KEY,
            "GROVE_HOSTS__COUNT": "1",
            **settings,
        }
        del self.env[NO_SERVICE_ENV]

    def grove(self, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        return finished(self.started(*args, **env))

    def started(self, *args: str, **env: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "grove.cli.entry", *args], stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, env={**self.env, **env},
        )  # fmt: skip

    def run(self, *options: str, **env: str) -> subprocess.CompletedProcess[str]:
        done = self.grove("run", *options, "--model", MODEL, '[[sim reply="hi there"]] hi', **env)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "hi there"
        return done

    def status(self) -> dict[str, Any]:
        done = self.grove("status", "--json")
        assert done.returncode == 0, done.stderr
        found: dict[str, Any] = json.loads(done.stdout)
        return found

    def log(self) -> str:
        path = self.config / "service.log"
        return path.read_text() if path.exists() else ""


def finished(process: subprocess.Popen[str]) -> subprocess.CompletedProcess[str]:
    out, err = process.communicate(timeout=TIMEOUT_S)
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


@pytest.fixture
def place(tmp_path: Path, simulator: SimulatorThread) -> Iterator[Place]:
    """The place, and at the end its service (if one is up) stopped by `grove down` there."""
    made = Place(tmp_path, simulator)
    yield made
    stop_service(made)


def stop_service(place: Place) -> None:
    state = read_state(place.config)
    if state is not None:
        down = place.grove("down")
        assert down.returncode == 0, down.stderr
        assert not process_alive(state.pid)


def stopped_by_itself(place: Place, pid: int) -> bool:
    """Whether the service `pid` ends, and its record goes, within STOP_WAIT_S."""
    deadline = time.monotonic() + STOP_WAIT_S
    while time.monotonic() < deadline:
        if not process_alive(pid) and not (place.config / "service.json").exists():
            return True
        time.sleep(0.5)
    return False


def test_the_first_run_starts_a_service_and_the_next_commands_use_it(place: Place) -> None:
    first = place.run()
    assert first.stderr.startswith(STARTING + "15 minutes idle; --no-service to run in-process)")
    assert first.stderr.count("\n") == 1  # one line, and nothing else
    started = place.status()
    assert started["autostarted"] is True and started["idle_stop_s"] == 900
    assert (started["simulate"], started["hosts"], started["clients"]) == (False, None, 0)
    assert started["agents"] == 1  # the first run's root is the service's

    second = place.run()
    assert second.stderr == ""
    after = place.status()
    assert after["pid"] == started["pid"] and after["agents"] == 2
    assert after["requests"] > started["requests"]  # the second run's, served by it

    agents = place.grove("agents")  # a read goes to it too, and starts nothing
    assert agents.returncode == 0 and agents.stderr == ""
    assert place.status()["requests"] > after["requests"]
    assert place.log().count("Stopping") == 0


def test_no_service_and_simulate_run_in_process_beside_a_service(place: Place) -> None:
    place.run()
    served = place.status()["requests"]
    for options, env in (
        (["--no-service"], {}),  # a global option, here after the command
        ([], {NO_SERVICE_ENV: "1"}),
        (["--simulate"], {}),  # this service does not simulate: a Grove of its own
    ):
        done = place.run(*options, **env)
        assert STARTING not in done.stderr
        assert place.status()["requests"] == served, (options, env)  # none went to it


def test_no_service_never_starts_one(place: Place) -> None:
    done = place.run(**{NO_SERVICE_ENV: "1"})
    assert done.stderr == ""
    assert read_state(place.config) is None


def test_a_service_that_cannot_start_leaves_the_command_to_run_in_process(place: Place) -> None:
    with holding(place.config / "service.lock"):  # as a `grove up` starting meanwhile does
        done = place.run()
    lines = done.stderr.splitlines()
    assert len(lines) == 2 and lines[0].startswith(STARTING), done.stderr
    assert lines[1] == (
        "Could not start a Grove service (Grove did not start: another Grove service is "
        "starting or running (grove status says where)); running in-process"
    )
    assert read_state(place.config) is None


@contextmanager
def holding(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        yield


def test_commands_that_need_no_ray_start_no_service(place: Place) -> None:
    for args in (["--help"], ["models"], ["status"], ["agents"], ["run", "--help"]):
        place.grove(*args)
    assert read_state(place.config) is None and not (place.config / "service.log").exists()


def test_two_first_commands_at_once_start_one_service(place: Place) -> None:
    arguments = ["run", "--model", MODEL, '[[sim reply="hi there"]] hi']
    both = [place.started(*arguments) for _ in range(2)]
    done = [finished(command) for command in both]
    assert [d.returncode for d in done] == [0, 0], [d.stderr for d in done]
    assert sum(STARTING in d.stderr for d in done) == 1, [d.stderr for d in done]
    status = place.status()
    assert status["agents"] == 2  # both roots are the one service's
    assert "another Grove service" not in place.log()  # no second one tried to start


@pytest.fixture
def quick_place(tmp_path: Path, simulator: SimulatorThread) -> Iterator[Place]:
    """A place whose services stop after 3 s with no client."""
    made = Place(tmp_path, simulator, GROVE_SERVICE__IDLE_STOP_S="3")
    yield made
    stop_service(made)


def test_the_service_stops_after_idle_stop_s_with_no_client(quick_place: Place) -> None:
    first = quick_place.run()
    assert STARTING + "3 s idle" in first.stderr
    state = read_state(quick_place.config)
    assert state is not None and state.idle_stop_s == 3
    assert stopped_by_itself(quick_place, state.pid)
    assert "Stopping: no client and nothing running for 3 s" in quick_place.log()
    again = quick_place.run()  # the next command starts another
    assert STARTING in again.stderr


def test_an_open_session_and_a_running_turn_keep_it_up(
    quick_place: Place, monkeypatch: pytest.MonkeyPatch
) -> None:
    quick_place.run()
    monkeypatch.setenv("XDG_CONFIG_HOME", quick_place.env["XDG_CONFIG_HOME"])  # its token
    state = read_state()
    assert state is not None
    session = RemoteGrove(state)
    session.start()  # what `grove chat` holds while it is open
    time.sleep(8)
    held = quick_place.status()
    assert held["clients"] == 1 and held["idle_s"] == 0
    root = session.create_root(MODEL)
    session.begin_turn(root.uuid, "[[sim tokens=80 tps=10]] a slow one")  # 8 s, nobody reading
    session.close()
    time.sleep(5)  # past idle_stop_s with no client: the turn keeps it up
    busy = quick_place.status()
    assert (busy["clients"], busy["running"]) == (0, 1)
    assert process_alive(state.pid)
    assert stopped_by_itself(quick_place, state.pid)  # once the turn is done and idle passed
