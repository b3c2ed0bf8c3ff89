"""`grove up`, `grove status`, `grove down`: a long-lived local Grove (Ray, the supervisor, the
HTTP API and dashboard) started in the background (here, or by a command: cli/autostart.py),
reported, and stopped with all it started.
"""

from __future__ import annotations

import ipaddress
import json
import os
import signal
import sys
import time
from typing import Annotated, Any

import typer

from grove.cli.context import CliContext, fail
from grove.cli.service_process import (
    ServiceStartError,
    idle_text,
    launch,
    wait_until_up,
)
from grove.providers.plurals import counted
from grove.server.files import (
    DEFAULT_PORT,
    TOKEN_FILE,
    ServiceState,
    grove_dir,
    process_alive,
    read_state,
)

DOWN_TIMEOUT_S = 60.0
ACTIVITY = ("clients", "requests", "idle_s", "running")  # what server/idle.py tells status


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
    from grove.server.service_link import dashboard_url

    sys.stdout.write(f"Grove is up (pid {state.pid}). Dashboard and API:\n{dashboard_url(state)}\n")


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
    from grove.server.client import RemoteGrove
    from grove.server.files import service_token
    from grove.server.remote_reads import RemoteReads
    from grove.server.service_link import RemoteError, dashboard_url, healthy

    state = read_state()
    if state is None:
        fail("No Grove service is up; `grove up` starts one")
    if not healthy(state):
        fail(f"Grove (pid {state.pid}) does not answer at {state.url}; `grove down` stops it")
    activity: dict[str, Any] = dict.fromkeys(ACTIVITY)
    try:
        with RemoteGrove(state, observer=True) as remote:
            reads = RemoteReads(remote.link)  # closed with the Grove
            agents: int | None = len(reads.agents(include_ended=True)["agents"])
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
