"""`run_process`, the one way tools start processes: in the sandbox when the policy says so,
held to its limits (actors/sandbox_limits.py), and killed whole at a timeout or a cancel.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from grove.actors.sandbox_limits import (
    SandboxCgroup,
    SandboxLimits,
    born_in,
    hold,
    release_cgroup,
    sandbox_cgroup,
)
from grove.actors.tools.pipes import closed, exited, kill_group, stream
from grove.actors.tools.sandbox import (
    SandboxPolicy,
    SandboxUnavailable,
    bwrap_arguments,
    command_environment,
    secret_paths,
)
from grove.actors.tools.sandbox_check import checked_bwrap

KILL_GRACE_S = 2.0


async def run_process(
    command: Sequence[str],
    root: Path,
    policy: SandboxPolicy,
    timeout_s: float,
    take: Callable[[bytes], None],
) -> int:
    """Run `command` in `root` under `policy` with stdin closed; its output (stdout and
    stderr together) goes to `take` as it comes; its exit code. A sandbox's first process
    waits until it is held to the policy's limits. At the timeout (TimeoutError) or when
    cancelled, its whole process group, and with it the sandbox and everything in it, is
    killed first."""
    with _git_mount_point(root, policy):
        environment = command_environment(policy)
        argv = list(command)
        passed: tuple[int, ...] = ()
        cgroup: SandboxCgroup | None = None
        if policy.sandboxed:
            bwrap, sized = await checked_bwrap()
            hidden = secret_paths(policy, os.environ)
            argv = bwrap_arguments(bwrap, policy, root, argv, hidden, sized=sized)
            environment["TMPDIR"] = "/tmp"  # the sandbox's own
            info, info_to_us = os.pipe()  # bubblewrap says there the pid of the sandbox's first
            go_from_us, go = os.pipe()  # which waits for a byte here before it runs anything
            passed = (info_to_us, go_from_us)
            at = argv.index("--")  # bwrap's, before the command
            argv[at:at] = ["--info-fd", str(info_to_us), "--block-fd", str(go_from_us)]
            cgroup = sandbox_cgroup(policy.limits)
        try:
            process = _started(argv, root, environment, passed, cgroup)
        except BaseException:
            if passed:
                closed(info, go)
            if cgroup is not None:
                release_cgroup(cgroup)
            raise
        finally:
            closed(*passed)
        assert process.stdout is not None
        try:
            async with asyncio.timeout(timeout_s):
                if passed:
                    await _let_go(info, go, policy.limits, cgroup)
                await stream(process.stdout.fileno(), take)
                return await exited(process)
        except BaseException:  # the timeout, or the turn was cancelled
            # Before `go` closes: a sandbox still waiting to be let go dies waiting.
            await kill_group(process, KILL_GRACE_S)
            raise
        finally:
            process.stdout.close()
            if passed:
                closed(info, go)
            if cgroup is not None:
                release_cgroup(cgroup)


# `.git` mount points this process's sandboxes made in workspaces that have none (bubblewrap
# makes the directory it mounts a read-only tmpfs on), with how many running sandboxes use
# each: the last to end removes it, so no workspace is left looking like a repository.
_made_git_points: dict[str, int] = {}


@contextlib.contextmanager
def _git_mount_point(root: Path, policy: SandboxPolicy) -> Iterator[None]:
    git = os.path.join(os.path.realpath(root), ".git")
    if (
        not policy.sandboxed
        or policy.mode != "workspace-write"
        or (git not in _made_git_points and os.path.lexists(git))
    ):
        yield
        return
    _made_git_points[git] = _made_git_points.get(git, 0) + 1
    try:
        yield
    finally:
        _made_git_points[git] -= 1
        if not _made_git_points[git]:
            del _made_git_points[git]
            with contextlib.suppress(OSError):  # gone, or not empty: not the mount point
                os.rmdir(git)


def _started(
    argv: list[str],
    root: Path,
    environment: dict[str, str],
    passed: tuple[int, ...],
    cgroup: SandboxCgroup | None,
) -> subprocess.Popen[bytes]:
    with born_in(cgroup):
        return subprocess.Popen(
            argv,
            cwd=root,
            env=environment,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, killed whole
            pass_fds=passed,
        )


async def _let_go(info: int, go: int, limits: SandboxLimits, cgroup: SandboxCgroup | None) -> None:
    """Once bubblewrap has said the pid of the sandbox's first process (waiting to be let
    go), hold that process to `limits`, then let it go. When bubblewrap said nothing it
    failed: its error is the output."""
    said: list[bytes] = []
    await stream(info, said.append)
    if said:
        try:
            await hold(json.loads(b"".join(said))["child-pid"], limits, cgroup)
        except PermissionError as exc:
            raise SandboxUnavailable(f"the sandbox's limits could not be set: {exc}") from exc
    with contextlib.suppress(BrokenPipeError):
        os.write(go, b"1")
