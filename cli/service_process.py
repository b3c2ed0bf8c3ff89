"""Starting a Grove service process in the background and waiting until it answers: what
`grove up` and a command's autostart (cli/autostart.py) share.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from grove.providers.errors import GroveError
from grove.providers.plurals import counted
from grove.server.files import (
    DEFAULT_PORT,
    ServiceState,
    grove_dir,
    read_state,
)

UP_TIMEOUT_S = 120.0
LOG_FILE = "service.log"


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
    """Start `python -m grove.server.main` in the background, in a session of its own (it outlives
    this command and its terminal), its output in the service log. `idle_stop_s`: a command
    starts it (autostart), to stop after that long with no client."""
    directory = grove_dir()
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    log_path = directory / LOG_FILE
    command = [sys.executable, "-m", "grove.server.main", "--host", host, "--port", str(port)]
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


def wait_until_up(
    starting: Starting, waited: Callable[[float], None] | None = None
) -> ServiceState:
    """The service's record once it answers /healthz (`waited` told the seconds so far at each
    look meanwhile); ServiceStartError with its log's last line if it exits, or when it has
    not answered within UP_TIMEOUT_S (then it is stopped)."""
    from grove.server.service_link import healthy

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


def idle_text(seconds: float) -> str:
    """`seconds` as the idle stop is spoken of: "15 minutes", "90 s"."""
    if seconds >= 60 and seconds % 60 == 0:
        return counted(int(seconds // 60), "minute")
    return f"{seconds:g} s"
