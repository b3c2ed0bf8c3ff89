"""What one sandbox may use (`SandboxLimits`: processes, memory, file size, CPU time, its /tmp)
and how a sandbox's first process is held to it before it runs anything (`hold`).

Resource limits (setrlimit) hold the memory, file size and CPU time. The process count is
RLIMIT_NPROC too, which counts the processes of one user in one user namespace (bubblewrap
makes one for a user other than root, so only the sandbox's own count); the kernel does not
enforce it for root, so a sandbox started by root also gets a pids cgroup of its own where the
machine lets Grove make one (`pids.max`). With cgroup v1 the starting thread steps into it for
the fork (`born_in`), which costs nothing; moving a process in (cgroup v2) waits for a grace
period of the kernel's, a few milliseconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import resource
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

MB = 1 << 20
CGROUPS = "grove-sandboxes"  # the directory of the sandboxes' cgroups, in the host's own


@dataclass(frozen=True, kw_only=True, slots=True)
class SandboxLimits:
    """At most `processes` processes at once, `memory_mb` of address space and `cpu_s` of
    CPU time a process, files of `file_size_mb`, and `tmp_mb` in its own /tmp."""

    processes: int = 512
    memory_mb: int = 8192
    file_size_mb: int = 512
    cpu_s: int = 600
    tmp_mb: int = 256

    def rlimits(self) -> tuple[tuple[int, tuple[int, int]], ...]:
        """Each resource limit, soft and hard. CPU time: SIGXCPU (a process may end itself
        well) a second before SIGKILL."""
        return (
            (resource.RLIMIT_NPROC, (self.processes, self.processes)),
            (resource.RLIMIT_AS, (self.memory_mb * MB, self.memory_mb * MB)),
            (resource.RLIMIT_FSIZE, (self.file_size_mb * MB, self.file_size_mb * MB)),
            (resource.RLIMIT_CPU, (self.cpu_s, self.cpu_s + 1)),
        )


@dataclass(frozen=True, slots=True)
class SandboxCgroup:
    """A sandbox's pids cgroup; `home`, with cgroup v1, the cgroup the starting thread steps
    back to after the fork (None with v2: the sandbox's first process is moved in)."""

    path: Path
    home: Path | None


class _CgroupRoom:
    """Where this process makes its sandboxes' pids cgroups (`CGROUPS` in its own pids cgroup,
    looked for once), and the cgroups it could not remove yet (their last process was still
    going: the next sandbox removes them)."""

    def __init__(self) -> None:
        self.looked = False
        self.parent: Path | None = None
        self.home: Path | None = None  # this process's own pids cgroup, with cgroup v1
        self.left: list[Path] = []
        self.names = itertools.count()

    def make(self, processes: int) -> SandboxCgroup | None:
        """A new cgroup allowing `processes` processes; None where Grove cannot make one."""
        parent = self._usable_parent()
        if parent is None:
            return None
        for path in list(self.left):
            with contextlib.suppress(OSError):
                path.rmdir()
                self.left.remove(path)
        path = parent / f"{os.getpid()}-{next(self.names)}"
        try:
            path.mkdir()
            (path / "pids.max").write_text(str(processes))
        except OSError:
            return None
        return SandboxCgroup(path, self.home)

    def remove(self, path: Path) -> None:
        try:
            path.rmdir()
        except OSError:
            self.left.append(path)

    def _usable_parent(self) -> Path | None:
        """In this process's own cgroup of the pids controller (cgroup v1, or v2 with pids
        delegated), when it may write there. The cgroups of processes gone are removed then."""
        if not self.looked:
            self.looked = True
            for base, v1 in _own_pids_cgroups():
                parent = base / CGROUPS
                try:
                    parent.mkdir(exist_ok=True)
                    if (parent / "cgroup.subtree_control").exists():  # v2
                        (parent / "cgroup.subtree_control").write_text("+pids")
                except OSError:
                    continue
                self.parent, self.home = parent, base if v1 else None
                _remove_orphans(parent)
                break
        return self.parent


_ROOM = _CgroupRoom()


def _own_pids_cgroups() -> list[tuple[Path, bool]]:
    """This process's cgroup directories that have the pids controller; whether each is v1."""
    try:
        memberships = Path("/proc/self/cgroup").read_text().splitlines()
        mounts = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return []
    found: list[tuple[Path, bool]] = []
    for line in memberships:
        _, controllers, path = line.split(":", 2)
        for mount in mounts:
            _, point, kind, options, *_ = mount.split()
            pids = "pids" in controllers.split(",")
            v1 = kind == "cgroup" and pids and "pids" in options.split(",")
            if v1 or (kind == "cgroup2" and controllers == ""):
                directory = Path(point) / path.lstrip("/")
                if v1 or "pids" in _read(directory / "cgroup.subtree_control").split():
                    found.append((directory, v1))
    return found


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _remove_orphans(parent: Path) -> None:
    """Remove the empty cgroups of processes that are gone (a host that was killed)."""
    for path in parent.iterdir():
        owner = path.name.partition("-")[0]
        if path.is_dir() and owner.isdigit() and not _alive(int(owner)):
            with contextlib.suppress(OSError):
                path.rmdir()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sandbox_cgroup(limits: SandboxLimits) -> SandboxCgroup | None:
    """A pids cgroup for a sandbox started by root (RLIMIT_NPROC holds for everyone else),
    where the machine lets Grove make one."""
    return _ROOM.make(limits.processes) if os.getuid() == 0 else None


@contextlib.contextmanager
def born_in(cgroup: SandboxCgroup | None) -> Iterator[None]:
    """With cgroup v1, this thread is in `cgroup` while the block runs (a fork, nothing
    else): what it starts is born there. Moving oneself is cheap; moving another process is
    not."""
    if cgroup is None or cgroup.home is None:
        yield
        return
    (cgroup.path / "tasks").write_text("0")
    try:
        yield
    finally:
        (cgroup.home / "tasks").write_text("0")


async def hold(pid: int, limits: SandboxLimits, cgroup: SandboxCgroup | None) -> None:
    """Hold process `pid` (a sandbox's first, waiting to run its command) to `limits`, and
    with cgroup v2 move it into `cgroup` (the kernel waits for a grace period: off the loop)."""
    for which, soft_and_hard in limits.rlimits():
        resource.prlimit(pid, which, soft_and_hard)
    if cgroup is not None and cgroup.home is None:
        await asyncio.to_thread((cgroup.path / "cgroup.procs").write_text, str(pid))


def remove_cgroup(cgroup: SandboxCgroup) -> None:
    _ROOM.remove(cgroup.path)
