"""`grove up`, `grove status`, `grove down`: a long-lived local Grove (Ray, the supervisor, the
HTTP API and dashboard) started in the background, reported, and stopped with all it started.
"""

from __future__ import annotations

import ipaddress
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Annotated

import typer

from cli.context import fail
from server.files import (
    DEFAULT_PORT,
    ServiceState,
    grove_dir,
    process_alive,
    read_state,
)

UP_TIMEOUT_S = 120.0
DOWN_TIMEOUT_S = 60.0
LOG_FILE = "service.log"


def up_command(
    port: Annotated[
        int, typer.Option("--port", min=1, max=65535, help="Where the API listens.")
    ] = (DEFAULT_PORT),
    host: Annotated[
        str,
        typer.Option(
            "--host",
            help="The address to listen on: 127.0.0.1 by default. Another address makes Grove "
            "reachable from other machines; every route but /healthz needs the token.",
        ),
    ] = "127.0.0.1",
    simulate: Annotated[
        bool, typer.Option("--simulate", help="Every provider is the built-in simulator.")
    ] = False,
) -> None:
    """Start a long-lived Grove in the background: Ray, the supervisor, the HTTP API and the
    dashboard. While it is up, run, agents, history, events and usage use it over HTTP."""
    running = read_state()
    if running is not None:
        fail(f"Grove is already up at {running.url} (pid {running.pid}); `grove down` stops it")
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        fail(f"--host: {host!r} is not an IP address", code=2)
    if not loopback:
        sys.stderr.write(
            f"Listening on {host}: other machines can reach Grove. Every route but /healthz "
            "needs the bearer token; keep it secret.\n"
        )
    directory = grove_dir()
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    log_path = directory / LOG_FILE
    command = [sys.executable, "-m", "server.main", "--host", host, "--port", str(port)]
    if simulate:
        command.append("--simulate")
    start = log_path.stat().st_size if log_path.exists() else 0  # what this start writes follows
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # it outlives this command and its terminal
            cwd=Path.cwd(),
        )
    state = wait_until_up(process, log_path, start)
    from cli.thin import dashboard_url

    sys.stdout.write(f"Grove is up (pid {state.pid}). Dashboard and API:\n{dashboard_url(state)}\n")


def wait_until_up(process: subprocess.Popen[bytes], log_path: Path, start: int) -> ServiceState:
    """The service's record once it answers /healthz; fails with its log's end if it exits."""
    from cli.thin import healthy

    deadline = time.monotonic() + UP_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            with log_path.open("rb") as log:
                log.seek(start)
                said = log.read().decode(errors="replace").strip().splitlines()
            fail("Grove did not start: " + (said[-1] if said else f"exit {process.returncode}"))
        state = read_state()
        if state is not None and state.pid == process.pid and healthy(state):
            return state
        time.sleep(0.2)
    process.terminate()
    fail(f"Grove did not answer within {UP_TIMEOUT_S:.0f} s; see {log_path}")


def status_command() -> None:
    """Whether a Grove service is up: its address (with the token), pid and agents."""
    from cli.thin import show_status

    raise typer.Exit(show_status())


def down_command() -> None:
    """Stop the Grove service and everything it started (Ray, its hosts, the simulator)."""
    state = read_state()
    if state is None:
        fail("No Grove service is up")
    os.kill(state.pid, signal.SIGTERM)
    deadline = time.monotonic() + DOWN_TIMEOUT_S
    while process_alive(state.pid):
        if time.monotonic() > deadline:
            os.kill(state.pid, signal.SIGKILL)
            fail(f"Grove (pid {state.pid}) did not stop within {DOWN_TIMEOUT_S:.0f} s: killed")
        time.sleep(0.1)
    read_state()  # removes a record the service could not remove itself
    sys.stdout.write(f"Grove (pid {state.pid}) is down.\n")
