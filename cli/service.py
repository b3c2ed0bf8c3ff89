"""`grove up`, `grove status`, `grove down`: a long-lived local Grove (Ray, the supervisor, the
HTTP API and dashboard) started in the background (here, or by a command: cli/autostart.py),
reported, and stopped with all it started.
"""

from __future__ import annotations

import ipaddress
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from cli.context import CliContext, fail
from providers.errors import GroveError
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
ACTIVITY = ("clients", "requests", "idle_s", "running")  # what server/idle.py tells status


class ServiceStartError(GroveError):
    """The service did not start; the text says why (its log's last line)."""


@dataclass(frozen=True)
class Starting:
    """A service process just started, and where its log begins for this start."""

    process: subprocess.Popen[bytes]
    log_path: Path
    log_offset: int


def launch(
    store: str | None,
    *,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    simulate: bool = False,
    hosts: int | None = None,
    idle_stop_s: float | None = None,
) -> Starting:
    """Start `python -m server.main` in the background, in a session of its own (it outlives
    this command and its terminal), its output in the service log. `idle_stop_s`: a command
    starts it (autostart), to stop after that long with no client."""
    directory = grove_dir()
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    log_path = directory / LOG_FILE
    command = [sys.executable, "-m", "server.main", "--host", host, "--port", str(port)]
    if simulate:
        command.append("--simulate")
    if hosts is not None:
        command += ["--hosts", str(hosts)]
    if idle_stop_s is not None:
        command += ["--autostarted", "--idle-stop-s", f"{idle_stop_s:g}"]
    offset = log_path.stat().st_size if log_path.exists() else 0  # what this start writes follows
    env = {**os.environ, **({"GROVE_STORE": store} if store else {})}
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=Path.cwd(),
            env=env,
        )
    return Starting(process, log_path, offset)


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
    hosts: Annotated[
        int | None,
        typer.Option(
            "--hosts",
            min=1,
            help="Agent host processes to start; default: [hosts] count, else one per CPU. "
            "Commands with the same --hosts (or --simulate) use this service.",
        ),
    ] = None,
) -> None:
    """Start a long-lived Grove in the background: Ray, the supervisor, the HTTP API and the
    dashboard. While it is up, run, chat, batch, agents, history, events and usage use it over
    HTTP, with its configuration (read now) and its store (--store, else GROVE_STORE). It stays
    until `grove down`."""
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
    starting = launch(context.store, host=host, port=port, simulate=simulate, hosts=hosts)
    try:
        state = wait_until_up(starting)
    except ServiceStartError as exc:
        fail(str(exc))
    from server.client import dashboard_url

    sys.stdout.write(f"Grove is up (pid {state.pid}). Dashboard and API:\n{dashboard_url(state)}\n")


def wait_until_up(
    starting: Starting, waited: Callable[[float], None] | None = None
) -> ServiceState:
    """The service's record once it answers /healthz (`waited` told the seconds so far at each
    look meanwhile); ServiceStartError with its log's last line if it exits, or when it has
    not answered within UP_TIMEOUT_S (then it is stopped)."""
    from server.client import healthy

    process = starting.process
    began = time.monotonic()
    while (elapsed := time.monotonic() - began) < UP_TIMEOUT_S:
        if process.poll() is not None:
            with starting.log_path.open("rb") as log:
                log.seek(starting.log_offset)
                said = log.read().decode(errors="replace").strip().splitlines()
            raise ServiceStartError(
                "Grove did not start: " + (said[-1] if said else f"exit {process.returncode}")
            )
        state = read_state()
        if state is not None and state.pid == process.pid and healthy(state):
            return state
        if waited is not None:
            waited(elapsed)
        time.sleep(0.2)
    process.terminate()
    raise ServiceStartError(
        f"Grove did not answer within {UP_TIMEOUT_S:.0f} s; see {starting.log_path}"
    )


def status_command(
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="One JSON object: url, host, port, pid, started, uptime_s, agents, token, "
            "token_file, dashboard, simulate, hosts, autostarted, idle_stop_s, clients, "
            "requests, idle_s, running.",
        ),
    ] = False,
) -> None:
    """Whether a Grove service is up: its address (with the token), pid, agents, how it was
    started, its clients and what runs in it. Exit 1 when none is up or it does not answer.
    Asking is not being a client: it keeps no service up."""
    from server.client import RemoteError, RemoteGrove, dashboard_url, healthy
    from server.files import service_token

    state = read_state()
    if state is None:
        fail("No Grove service is up; `grove up` starts one")
    if not healthy(state):
        fail(f"Grove (pid {state.pid}) does not answer at {state.url}; `grove down` stops it")
    activity: dict[str, Any] = dict.fromkeys(ACTIVITY)
    try:
        with RemoteGrove(state, observer=True) as remote:
            agents: int | None = len(remote.agents(include_ended=True)["agents"])
            activity.update(remote.activity())
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
            "simulate": state.simulate,
            "hosts": state.hosts,
            "autostarted": state.autostarted,
            "idle_stop_s": state.idle_stop_s,
            **activity,
        }
        sys.stdout.write(json.dumps(found) + "\n")
        return
    count = "? agents" if agents is None else counted(agents, "agent")
    sys.stdout.write(
        f"Grove is up (pid {state.pid}, {uptime:,.0f} s, {count}):\n{dashboard_url(state)}\n"
        f"{how_started(state)}; {activity_line(activity)}\n"
    )


def how_started(state: ServiceState) -> str:
    """How the service was started, as `grove status` says it."""
    ways = [way for way, used in (("on the simulator", state.simulate),) if used]
    if state.hosts is not None:
        ways.append(f"with {counted(state.hosts, 'host')}")
    if state.autostarted and state.idle_stop_s is not None:
        line = f"Started by a command, stops after {idle_text(state.idle_stop_s)} idle"
    else:
        line = "Started by grove up, stays until grove down"
    return " ".join([line, *ways])


def activity_line(activity: dict[str, Any]) -> str:
    """Its clients and what runs in it, as `grove status` says them ("?" when unknown)."""
    clients, running, idle = (activity[key] for key in ("clients", "running", "idle_s"))
    if clients is None:
        return "clients unknown"
    said = [
        counted(clients, "client"),
        f"{counted(running, 'turn or batch', 'turns or batches')} running",
    ]
    if not clients and not running:
        said.append(f"idle {idle:,.0f} s")
    return ", ".join(said)


def idle_text(seconds: float) -> str:
    """`seconds` as the idle stop is spoken of: "15 minutes", "90 s"."""
    if seconds >= 60 and seconds % 60 == 0:
        return counted(int(seconds // 60), "minute")
    return f"{seconds:g} s"


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
