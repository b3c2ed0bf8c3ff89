"""A Grove service started in the background by the first command that needs Ray (`[service]
autostart`), for it and the commands after it; one however many commands start at once.

It stops by itself after `[service] idle_stop_s` with no client (server/idle.py).
"""

from __future__ import annotations

import contextlib
import fcntl
import socket
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from grove.cli.service_process import idle_text, launch, wait_until_up
from grove.providers.errors import GroveError
from grove.server.files import DEFAULT_PORT, ServiceState, grove_dir, private_file, read_state

if TYPE_CHECKING:
    from grove.server.client import RemoteGrove

LOCK_FILE = "autostart.lock"  # beside the service's record: held while one command starts it
SLOW_START_S = 2.0  # a terminal is shown the seconds a start takes after this long


def started_service(store: str | None, idle_stop_s: float) -> RemoteGrove | None:
    """A service started now in the background (or by a command that was starting one
    meanwhile), stopping after `idle_stop_s` with no client; None when it could not start,
    said on stderr in one line: the command then runs in-process."""
    from grove.server.client import RemoteGrove

    try:
        with starting_alone(grove_dir()):
            state = read_state() or started(store, idle_stop_s)
    except (GroveError, OSError) as exc:
        reason = str(exc) if isinstance(exc, GroveError) else file_problem(exc)
        sys.stderr.write(f"Could not start a Grove service ({reason}); running in-process\n")
        return None
    return RemoteGrove(state)


def file_problem(exc: OSError) -> str:
    """ "cannot write PATH: REASON", or what the error says."""
    if exc.filename is None or exc.strerror is None:
        return str(exc)
    return f"cannot write {exc.filename}: {exc.strerror}"


@contextmanager
def starting_alone(directory: Path) -> Iterator[None]:
    """Held while this command looks for a service and starts one: a second command waits
    here (saying so), then finds the service the first started."""
    with private_file(directory / LOCK_FILE).open("a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            sys.stderr.write("Waiting for the Grove service another command is starting\n")
            fcntl.flock(lock, fcntl.LOCK_EX)
        yield  # closing the file lets the lock go


def started(store: str | None, idle_stop_s: float) -> ServiceState:
    """Start the service and wait until it answers (ServiceStartError if it does not)."""
    sys.stderr.write(
        f"Starting a Grove service in the background (stops after {idle_text(idle_stop_s)} "
        "idle; --no-service to run in-process)\n"
    )
    sys.stderr.flush()
    starting = launch(store, port=service_port(), idle_stop_s=idle_stop_s)
    with shown_progress(sys.stderr) as waited:
        return wait_until_up(starting, waited)


def service_port() -> int:
    """The service's usual port (8740) when it is free on 127.0.0.1, else a free one."""
    from grove.server.main import port_problem

    if port_problem("127.0.0.1", DEFAULT_PORT) is None:
        return DEFAULT_PORT
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def shown_progress(stream: TextIO) -> Iterator[Callable[[float], None]]:
    """What `wait_until_up` tells the seconds waited: on a terminal, after SLOW_START_S, one
    line counting them, cleared at the end; elsewhere nothing."""
    shown = False

    def waited(seconds: float) -> None:
        nonlocal shown
        if seconds >= SLOW_START_S and stream.isatty():
            stream.write(f"\r  starting Ray and the supervisor: {seconds:.0f} s")
            stream.flush()
            shown = True

    try:
        yield waited
    finally:
        if shown:
            with contextlib.suppress(OSError):
                stream.write("\r\033[K")
                stream.flush()
