"""`python -m grove.server.main`: the long-lived Grove that `grove up` starts in the background
(Ray, the supervisor, the HTTP API), recorded in the config directory while it serves.

It holds a lock file for its whole life, so a second one refuses to start; SIGTERM (`grove
down`) stops the API, then Grove and everything Grove started, as does `--idle-stop-s` passing
with no client and nothing running (server/idle.py).
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import os
import socket
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import IO, TYPE_CHECKING

from grove.server.files import DEFAULT_PORT, ServiceState, grove_dir, remove_state, write_state

LOCK_FILE = "service.lock"
TRIM_EVERY_S = 3600.0

if TYPE_CHECKING:
    from grove.supervisor.config import GroveSettings


def port_problem(host: str, port: int) -> str | None:
    """Why the service cannot listen on `host:port`, or None."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            return f"cannot listen on {host}:{port}: {exc.strerror or exc}; pass --port"
    return None


def take_lock(directory: Path) -> IO[str] | None:
    """The service's lock, held until this process ends; None when another one holds it."""
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    handle = (directory / LOCK_FILE).open("a")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None
    return handle


async def serve(how: ServiceState) -> None:
    """Serve a Grove where and as `how` says (address, simulate, hosts, idle stop), recorded
    in the config directory while it listens."""
    from grove.supervisor.local_ray import keep_local_ray_on_loopback

    keep_local_ray_on_loopback(None)  # before anything imports Ray
    import uvicorn

    from grove.server.app import create_app
    from grove.server.files import service_token
    from grove.server.idle import Clients, stop_when_idle
    from grove.supervisor.api import Grove

    class RecordedServer(uvicorn.Server):
        """Records the service in the config directory once it listens."""

        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            if self.started:
                started = time.time()
                write_state(replace(how, pid=os.getpid(), started=started), directory)

    directory = grove_dir()
    token = service_token(directory)
    clients = Clients()
    with Grove(simulate=how.simulate, hosts=how.hosts) as grove:
        app = create_app(grove, token, directory / "batches", clients)
        config = uvicorn.Config(
            app, host=how.host, port=how.port, log_level="warning", access_log=False
        )
        server = RecordedServer(config)
        chores = [asyncio.create_task(trim_events_forever(grove.settings))]
        if how.idle_stop_s is not None:
            chores.append(asyncio.create_task(stop_when_idle(server, clients, how.idle_stop_s)))
        try:
            await server.serve()
        finally:
            for chore in chores:
                chore.cancel()
            remove_state(os.getpid(), directory)


async def trim_events_forever(settings: GroveSettings) -> None:
    """Keep the event log to `[events] keep_days`: now, then every hour."""
    from grove.providers.errors import GroveError
    from grove.supervisor.store import open_store

    def trim() -> None:
        try:
            store = open_store(settings.store)
            try:
                store.trim_events(time.time() - settings.events.keep_s)
            finally:
                store.close()
        except GroveError as exc:  # tried again in an hour; the log says why
            sys.stderr.write(f"could not trim the event log: {exc}\n")

    while True:
        await asyncio.to_thread(trim)
        await asyncio.sleep(TRIM_EVERY_S)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument("--simulate", action="store_true", help="every provider is a simulator")
    parser.add_argument("--hosts", type=int, default=None, help="agent hosts (default: config)")
    parser.add_argument("--autostarted", action="store_true", help="a command started it")
    parser.add_argument(
        "--idle-stop-s", type=float, default=None, help="stop after this long with no client"
    )
    args = parser.parse_args()
    lock = take_lock(grove_dir())
    if lock is None:
        sys.exit("another Grove service is starting or running (grove status says where)")
    problem = port_problem(args.host, args.port)
    if problem is not None:
        sys.exit(problem)
    try:
        how = ServiceState(
            pid=0,
            host=args.host,
            port=args.port,
            started=0.0,
            simulate=args.simulate,
            hosts=args.hosts,
            autostarted=args.autostarted,
            idle_stop_s=args.idle_stop_s,
        )
        asyncio.run(serve(how))
    finally:
        lock.close()


if __name__ == "__main__":
    main()
