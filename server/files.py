"""The service's files in the Grove config directory: its bearer token (made on first start,
0600) and the record of the running service (pid, address); stdlib only (and the stdlib-only
providers/private_files.py), for the thin client.
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
from dataclasses import asdict, dataclass
from pathlib import Path

from grove.providers.private_files import keep_private

TOKEN_FILE = "service-token"
STATE_FILE = "service.json"
DEFAULT_PORT = 8740


def grove_dir() -> Path:
    """`$XDG_CONFIG_HOME/grove`, or `~/.config/grove` (as providers/credentials.py)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "grove"


def service_token(directory: Path | None = None) -> str:
    """The bearer token every route but /healthz needs: made on first use, kept 0600 (one that
    others can read is made 0600, with a warning)."""
    path = (directory or grove_dir()) / TOKEN_FILE
    if path.exists():
        keep_private(path)
        return path.read_text().strip()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    token = secrets.token_urlsafe(32)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as file:
        file.write(token + "\n")
    return token


def private_file(path: Path) -> Path:
    """`path`, made if missing, readable by its owner only, in a directory only its owner may
    enter (both tightened when they already existed)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.parent.chmod(0o700)
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
    path.chmod(0o600)
    return path


def token_matches(given: str | None, expected: str) -> bool:
    """In constant time: whether `given` is the token."""
    return given is not None and hmac.compare_digest(given.encode(), expected.encode())


@dataclass(frozen=True, slots=True)
class ServiceState:
    """What `grove up` records of the service it started, and how it was started: on the
    simulator, with how many hosts (None: the configured count), by a command that needed
    Ray (`autostarted`), stopping after `idle_stop_s` without clients (None: never)."""

    pid: int
    host: str
    port: int
    started: float
    simulate: bool = False
    hosts: int | None = None
    autostarted: bool = False
    idle_stop_s: float | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"


def state_path(directory: Path | None = None) -> Path:
    return (directory or grove_dir()) / STATE_FILE


def write_state(state: ServiceState, directory: Path | None = None) -> None:
    path = state_path(directory)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(asdict(state)))
    partial.replace(path)


def read_state(directory: Path | None = None) -> ServiceState | None:
    """The recorded service, if its process still runs; a record left by one that died is
    removed (and None returned)."""
    path = state_path(directory)
    try:
        data = json.loads(path.read_text())
        hosts, idle_stop_s = data.get("hosts"), data.get("idle_stop_s")
        state = ServiceState(
            pid=int(data["pid"]),
            host=str(data["host"]),
            port=int(data["port"]),
            started=float(data["started"]),
            simulate=bool(data.get("simulate", False)),
            hosts=None if hosts is None else int(hosts),
            autostarted=bool(data.get("autostarted", False)),
            idle_stop_s=None if idle_stop_s is None else float(idle_stop_s),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not process_alive(state.pid):
        path.unlink(missing_ok=True)
        return None
    return state


def remove_state(pid: int, directory: Path | None = None) -> None:
    """Remove the record if it is this process's (a newer service may have written its own)."""
    path = state_path(directory)
    try:
        if json.loads(path.read_text()).get("pid") == pid:
            path.unlink()
    except (OSError, ValueError):
        pass


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
