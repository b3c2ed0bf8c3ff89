"""Ray on this machine for Grove: when Grove starts Ray itself, every Ray service listens on
127.0.0.1 only, token auth is on, the token file is readable by its owner only, Ray runs
without the processes Grove does not use, and nothing of it outlives Grove (`LocalRay`).

Joining a cluster (`--address`, RAY_ADDRESS) changes none of this: see deploy/README.md.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import stat
import subprocess
import sys
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

from grove.providers.errors import GroveError
from grove.supervisor.reaper import MARK_VARIABLE

REAPER = Path(__file__).with_name("reaper.py")
REAPER_WAIT_S = 10.0

# Ray reads this once, when it is imported: "0" keeps a node it starts on 127.0.0.1 (its gRPC
# servers, object manager and agents bind to the node's address) instead of rewriting
# 127.0.0.1 to the machine's address, where they would listen on every interface.
LOOPBACK_NODE_VARIABLE = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
AUTH_MODE_VARIABLE = "RAY_AUTH_MODE"
TOKEN_VARIABLE = "RAY_AUTH_TOKEN"
TOKEN_PATH_VARIABLE = "RAY_AUTH_TOKEN_PATH"

log = logging.getLogger("grove.ray")


def keep_local_ray_on_loopback(
    address: str | None, environ: MutableMapping[str, str] = os.environ
) -> None:
    """Call before Ray is imported: when there is no cluster to join, the Ray that Grove will
    start keeps to loopback. A choice the user made in the environment stands."""
    if address or environ.get("RAY_ADDRESS") or "ray" in sys.modules:
        return
    environ.setdefault(LOOPBACK_NODE_VARIABLE, "0")


def prepare_local_ray(environ: MutableMapping[str, str] = os.environ) -> None:
    """Just before Grove starts Ray: token auth on (unless the user chose a mode) with a
    private token file; a warning when Ray was imported too early to keep to loopback."""
    from ray._private import ray_constants

    if ray_constants.ENABLE_RAY_CLUSTER:
        log.warning(
            "Ray was imported before Grove could keep it on 127.0.0.1, so the Ray Grove starts "
            "listens on every interface; set %s=0 before importing Ray",
            LOOPBACK_NODE_VARIABLE,
        )
    if AUTH_MODE_VARIABLE not in environ:
        environ[AUTH_MODE_VARIABLE] = "token"
        # Ray read its settings when it was imported; this is how it refreshes them itself
        # when it turns token auth on (and then it prints no notice about doing so).
        from ray._raylet import Config  # type: ignore[attr-defined]

        Config.initialize("")
    secure_token(environ)


def default_token_path() -> Path:
    """Where Ray keeps its token unless told otherwise."""
    return Path.home() / ".ray" / "auth_token"


class RayTokenError(GroveError):
    """The token file cannot be made where it is to be; the text says where and why."""


def secure_token(environ: MutableMapping[str, str] = os.environ) -> None:
    """With token auth on, the token file, made here when missing (with its directories, 0700),
    is 0600 and Ray's own directory for it 0700. A token given in the environment is left as
    it is."""
    if environ.get(AUTH_MODE_VARIABLE, "").lower() != "token" or environ.get(TOKEN_VARIABLE):
        return
    chosen = environ.get(TOKEN_PATH_VARIABLE)
    path = Path(chosen) if chosen else default_token_path()
    where = f"{TOKEN_PATH_VARIABLE}={chosen}" if chosen else str(path)
    if path.parent.exists() and not path.parent.is_dir():
        raise RayTokenError(f"cannot make Ray's token file ({where}): {path.parent} is a file")
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not chosen:  # Ray's own directory; one the user chose is left as it is
            _owner_only(path.parent, 0o700)
        try:
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            _owner_only(path, 0o600)
            return
    except OSError as exc:
        raise RayTokenError(
            f"cannot make Ray's token file ({where}): {exc.strerror or exc}"
        ) from None
    with os.fdopen(descriptor, "w") as token_file:
        token_file.write(secrets.token_hex(32))


def _owner_only(path: Path, mode: int) -> None:
    """Take group and other permissions off `path` when this user owns it."""
    status = path.stat()
    if status.st_uid == os.getuid() and stat.S_IMODE(status.st_mode) & 0o077:
        path.chmod(mode)


def start_ray(address: str | None, namespace: str | None = None) -> LocalRay | None:
    """Join the cluster at `address` (or RAY_ADDRESS), or start Ray on this machine and return
    it (stop it after `ray.shutdown()`)."""
    import ray

    local = None
    if not (address or os.environ.get("RAY_ADDRESS")):
        prepare_local_ray()
        local = LocalRay.start()
        address = local.address
    try:
        ray.init(address=address, namespace=namespace, log_to_driver=False, configure_logging=False)
    except BaseException:
        if local is not None:
            local.stop()
        raise
    quiet_ray_reports()
    return local


def quiet_ray_reports() -> None:
    """Whatever `log_to_driver` says, a driver prints the raylet's reports about its job's
    workers ("(raylet) A worker died or was killed ...", the memory monitor's kills) to its
    stdout, into a command's answer: Ray's own switch for what its driver prints turns that
    off. Grove says what happened itself (supervisor/host_deaths.py)."""
    import ray._private.worker

    ray._private.worker._worker_logs_enabled = False


class LocalRay:
    """A Ray head node Grove started here, without what Grove does not use (the autoscaler's
    monitor, the log monitor: their work is for clusters and for logs shown by the driver),
    and with a reaper (supervisor/reaper.py) that kills whatever is left of it when Grove
    ends, however it ends. Ray's API server and its two agents are not optional."""

    def __init__(self, node: Any, reaper: subprocess.Popen[bytes]) -> None:
        self._node = node
        self._reaper = reaper

    @classmethod
    def start(cls) -> LocalRay:
        """Call `prepare_local_ray` first."""
        from ray._private.node import Node
        from ray._private.parameter import RayParams

        mark = {MARK_VARIABLE: secrets.token_hex(16)}  # the raylet's, so what it starts has it
        reaper = subprocess.Popen(
            [sys.executable, "-S", str(REAPER), f"{MARK_VARIABLE}={mark[MARK_VARIABLE]}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # a Ctrl+C or hang-up for Grove's group is not for it
        )
        # ray.init turns usage statistics off for the clusters it starts; so does Grove.
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        try:
            params = RayParams(
                node_ip_address="127.0.0.1",
                include_dashboard=False,
                no_monitor=True,
                include_log_monitor=False,  # type: ignore[arg-type]  # a flag, typed str
                env_vars=mark,
            )
            node = Node(params, head=True, shutdown_at_exit=False, spawn_reaper=True)
            assert reaper.stdin is not None
            services = [info.process.pid for infos in node.all_processes.values() for info in infos]
            reaper.stdin.write("".join(f"{pid}\n" for pid in services).encode())
            reaper.stdin.flush()
        except BaseException:
            _end_reaper(reaper)
            raise
        return cls(node, reaper)

    @property
    def address(self) -> str:
        address: str = self._node.address
        return address

    def stop(self) -> None:
        """Stop Ray's processes, then let the reaper make sure none is left."""
        try:
            self._node.kill_all_processes(check_alive=False, allow_graceful=True, wait=True)
        finally:
            _end_reaper(self._reaper)


def _end_reaper(reaper: subprocess.Popen[bytes]) -> None:
    """Close the reaper's pipe (it reaps and exits) and wait for it."""
    assert reaper.stdin is not None
    with contextlib.suppress(OSError):
        reaper.stdin.close()
    with contextlib.suppress(subprocess.TimeoutExpired):
        reaper.wait(REAPER_WAIT_S)
