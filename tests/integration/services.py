"""A Grove service for tests, started as a user starts one (`grove up --simulate` in the
background, in a config directory of its own) and stopped with `grove down`; one per module.
Or the service's app over a Grove of the test process, served from a thread of it.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import uvicorn

from grove.cli.context import NO_SERVICE_ENV
from grove.server.app import create_app
from grove.server.files import ServiceState, process_alive, remove_state, service_token, write_state
from grove.supervisor import Grove
from tests.conftest import free_loopback_port
from tests.integration.groves import cli_environment

TIMEOUT_S = 180
ONE_HOST = {"GROVE_HOSTS__COUNT": "1"}  # for a service whose turns need no second host


@dataclass(frozen=True)
class Service:
    env: dict[str, str]
    url: str
    token: str
    config: Path

    def grove(
        self, *args: str, cwd: Path | None = None, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """`grove ARGS` in a process of its own, with this service up."""
        return subprocess.run(
            [sys.executable, "-m", "grove.cli.entry", *args], capture_output=True, text=True,
            env=self.env, timeout=TIMEOUT_S, check=False, cwd=cwd, input=stdin,
        )  # fmt: skip

    def api(self) -> httpx.Client:
        headers = {"authorization": f"Bearer {self.token}"}
        return httpx.Client(base_url=self.url, headers=headers, timeout=60)


@contextmanager
def grove_service(
    base: Path,
    env: dict[str, str] | None = None,
    *,
    simulate: bool = True,
    open_files: int | None = None,
    rivals: list[tuple[int, str]] | None = None,
) -> Iterator[Service]:
    """A service on the simulator (on the real providers without `simulate`) with its store
    and config directory in `base` (and the settings of `env`), stopped, with all it started,
    at the end. `open_files`: the soft limit of open files `grove up` starts with (else this
    process's). `rivals`: two `grove up`s are started at once, each on a port of its own, and
    the exit code and stderr of each go into the list; the service is the one that started."""
    env = {**cli_environment(base), **(env or {})}
    env[NO_SERVICE_ENV] = "0"  # its commands go to the service
    simulated = ["--simulate"] if simulate else []

    def limit_open_files() -> None:
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        resource.setrlimit(resource.RLIMIT_NOFILE, (open_files or hard, hard))

    def up(port: int) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "grove.cli.entry", "up", *simulated, "--port", str(port)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
            preexec_fn=None if open_files is None else limit_open_files,
        )  # fmt: skip

    ports = [free_loopback_port() for _ in range(1 if rivals is None else 2)]
    ups = [up(port) for port in ports]
    outcomes = [(one.communicate(timeout=TIMEOUT_S), one.returncode) for one in ups]
    if rivals is not None:
        rivals.extend((code, stderr) for (_, stderr), code in outcomes)
    started = [(port, out) for port, ((out, _), code) in zip(ports, outcomes, strict=True)
               if code == 0]  # fmt: skip
    assert started, outcomes
    port, stdout = started[0]
    address = stdout.strip().splitlines()[-1]
    assert address.startswith(f"http://127.0.0.1:{port}/?token=")
    token = address.split("token=", 1)[1]
    running = Service(env, f"http://127.0.0.1:{port}", token, base / "config" / "grove")
    recorded = json.loads((running.config / "service.json").read_text())
    try:
        yield running
    finally:
        down = running.grove("down")
        assert down.returncode == 0, down.stderr
        assert not process_alive(recorded["pid"])  # it stopped, and its Ray with it
        assert not (running.config / "service.json").exists()


@contextmanager
def app_served(grove: Grove, token: str, batches: Path) -> Iterator[int]:
    """The service's app (server/app.py) over `grove`, served on a free loopback port from a
    thread of this process; the port, once it listens."""
    port = free_loopback_port()
    app = create_app(grove, token, batches)
    server = uvicorn.Server(uvicorn.Config(app, port=port, log_level="warning"))
    serving = threading.Thread(target=server.run)
    serving.start()
    try:
        deadline = time.monotonic() + 60
        while not server.started:
            assert serving.is_alive() and time.monotonic() < deadline
            time.sleep(0.05)
        yield port
    finally:
        server.should_exit = True
        serving.join(60)


@contextmanager
def service_in_process(
    grove: Grove, base: Path, env: dict[str, str] | None = None
) -> Iterator[Service]:
    """A service on `grove` (its store is the service's) as `grove up` would record it in a
    config directory in `base`: a command with its `env` goes to it, as to a `grove up`."""
    env = {**cli_environment(base), "GROVE_STORE": str(grove.settings.store), **(env or {})}
    env[NO_SERVICE_ENV] = "0"  # its commands go to the service
    config = base / "config" / "grove"
    token = service_token(config)
    with app_served(grove, token, config / "batches") as port:
        write_state(ServiceState(os.getpid(), "127.0.0.1", port, time.time()), config)
        try:
            yield Service(env, f"http://127.0.0.1:{port}", token, config)
        finally:
            remove_state(os.getpid(), config)
