"""What one sandbox may use (`SandboxLimits`: processes, memory, file size, CPU time, its /tmp)
and how a sandbox's first process is held to it before it runs anything (`hold`).

Resource limits (setrlimit) hold the memory, file size and CPU time. The process count is
RLIMIT_NPROC too, which counts the processes of one user in one user namespace (bubblewrap
makes one for a user other than root, so only the sandbox's own count); the kernel does not
enforce it for root, so a sandbox started by root also gets a pids cgroup of its own where the
machine lets Grove make one (`pids.max`), kept for the next sandbox once it is gone. With
cgroup v1 the starting thread steps into it for the fork (`born_in`), which costs next to
nothing; moving a process in (cgroup v2) waits for a grace period of the kernel's.
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


@dataclass(slots=True)
class SandboxCgroup:
    """A sandbox's pids cgroup, allowing `processes`; `tasks`, with cgroup v1, its tasks
    file, open, for the starting thread to step in (None with v2: the sandbox's first process
    is moved in)."""

    path: Path
    processes: int
    tasks: int | None


class _CgroupRoom:
    """Where this process makes its sandboxes' pids cgroups (`CGROUPS` in its own pids cgroup,
    looked for once), and those free to be used again (a sandbox takes one for its life)."""

    def __init__(self) -> None:
        self.looked = False
        self.parent: Path | None = None
        self.home_tasks: int | None = None  # with cgroup v1, this process's own tasks file
        self.free: list[SandboxCgroup] = []
        self.names = itertools.count()

    def take(self, processes: int) -> SandboxCgroup | None:
        """A cgroup allowing `processes` processes; None where Grove cannot make one."""
        if self.free:
            cgroup = self.free.pop()
        else:
            parent = self.usable_parent()
            if parent is None:
                return None
            path = parent / f"{os.getpid()}-{next(self.names)}"
            try:
                path.mkdir()
                tasks = None if self.home_tasks is None else os.open(path / "tasks", os.O_WRONLY)
            except OSError:
                return None
            cgroup = SandboxCgroup(path, 0, tasks)
        if cgroup.processes != processes:
            (cgroup.path / "pids.max").write_text(str(processes))
            cgroup.processes = processes
        return cgroup

    def usable_parent(self) -> Path | None:
        """In this process's own cgroup of the pids controller (cgroup v1, or v2 with pids
        delegated), when it may write there. The cgroups of processes gone are removed then."""
        if not self.looked:
            self.looked = True
            for base, v1 in _own_pids_cgroups():
                parent = base / CGROUPS
                try:
                    parent.mkdir(exist_ok=True)
                    if not v1:
                        (parent / "cgroup.subtree_control").write_text("+pids")
                    home = os.open(base / "tasks", os.O_WRONLY) if v1 else None
                except OSError:
                    continue
                self.parent, self.home_tasks = parent, home
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
    """Remove the cgroups of processes that are gone (a process keeps its own to the end)."""
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


def processes_limited() -> bool:
    """Whether a sandbox's process count holds here: RLIMIT_NPROC does for a user other than
    root; for root, a pids cgroup Grove may make does."""
    return os.getuid() != 0 or _ROOM.usable_parent() is not None


def sandbox_cgroup(limits: SandboxLimits) -> SandboxCgroup | None:
    """A pids cgroup for a sandbox started by root (RLIMIT_NPROC holds for everyone else),
    where the machine lets Grove make one; `release_cgroup` once the sandbox is gone."""
    return _ROOM.take(limits.processes) if os.getuid() == 0 else None


def release_cgroup(cgroup: SandboxCgroup) -> None:
    _ROOM.free.append(cgroup)


@contextlib.contextmanager
def born_in(cgroup: SandboxCgroup | None) -> Iterator[None]:
    """With cgroup v1, this thread is in `cgroup` while the block runs (a fork, nothing
    else): what it starts is born there. A thread moving itself (writing 0) is cheap; moving
    another process waits for a grace period of the kernel's."""
    home = _ROOM.home_tasks
    if cgroup is None or cgroup.tasks is None or home is None:
        yield
        return
    os.write(cgroup.tasks, b"0")
    try:
        yield
    finally:
        os.write(home, b"0")


async def hold(pid: int, limits: SandboxLimits, cgroup: SandboxCgroup | None) -> None:
    """Hold process `pid` (a sandbox's first, waiting to run its command) to `limits`, and
    with cgroup v2 move it into `cgroup` (off the event loop: that waits for the kernel)."""
    for which, soft_and_hard in limits.rlimits():
        resource.prlimit(pid, which, soft_and_hard)
    if cgroup is not None and cgroup.tasks is None:
        await asyncio.to_thread((cgroup.path / "cgroup.procs").write_text, str(pid))
