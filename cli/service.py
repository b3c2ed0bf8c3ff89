"""`grove up`, `grove status`, `grove down`: a long-lived local Grove (Ray, the supervisor, the
HTTP API and dashboard) started in the background, reported, and stopped with all it started.
"""

from __future__ import annotations

import ipaddress
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Annotated

import typer

from cli.context import CliContext, fail
from providers.plurals import counted
from server.files import (
    DEFAULT_PORT,
    TOKEN_FILE,
    ServiceState,
    grove_dir,
    process_alive,
    read_state,
)

UP_TIMEOUT_S = 120.0
DOWN_TIMEOUT_S = 60.0
LOG_FILE = "service.log"


def up_command(
    ctx: typer.Context,
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
    dashboard. While it is up, run, chat, batch, agents, history, events and usage use it over
    HTTP, with its configuration (read now) and its store (--store, else GROVE_STORE)."""
    context: CliContext = ctx.obj
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
    env = {**os.environ, **({"GROVE_STORE": context.store} if context.store else {})}
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # it outlives this command and its terminal
            cwd=Path.cwd(),
            env=env,
        )
    state = wait_until_up(process, log_path, start)
    from server.client import dashboard_url

    sys.stdout.write(f"Grove is up (pid {state.pid}). Dashboard and API:\n{dashboard_url(state)}\n")


def wait_until_up(process: subprocess.Popen[bytes], log_path: Path, start: int) -> ServiceState:
    """The service's record once it answers /healthz; fails with its log's end if it exits."""
    from server.client import healthy

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


def status_command(
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="One JSON object: url, host, port, pid, started, uptime_s, agents, token, "
            "token_file, dashboard.",
        ),
    ] = False,
) -> None:
    """Whether a Grove service is up: its address (with the token), pid and agents. Exit 1
    when none is up or it does not answer."""
    from server.client import RemoteError, RemoteGrove, dashboard_url, healthy
    from server.files import service_token

    state = read_state()
    if state is None:
        fail("No Grove service is up; `grove up` starts one")
    if not healthy(state):
        fail(f"Grove (pid {state.pid}) does not answer at {state.url}; `grove down` stops it")
    try:
        with RemoteGrove(state) as remote:
            agents: int | None = len(remote.agents(include_ended=True)["agents"])
    except RemoteError:
        agents = None
    uptime = time.time() - state.started
    if as_json:
        found = {
            "url": state.url,
            "host": state.host,
            "port": state.port,
            "pid": state.pid,
            "started": state.started,
            "uptime_s": round(uptime, 1),
            "agents": agents,
            "token": service_token(),
            "token_file": str(grove_dir() / TOKEN_FILE),
            "dashboard": dashboard_url(state),
        }
        sys.stdout.write(json.dumps(found) + "\n")
        return
    count = "? agents" if agents is None else counted(agents, "agent")
    sys.stdout.write(
        f"Grove is up (pid {state.pid}, {uptime:,.0f} s, {count}):\n{dashboard_url(state)}\n"
    )


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
