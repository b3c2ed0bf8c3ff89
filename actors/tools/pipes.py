"""Waiting on a child process without blocking the event loop: what its pipes carry, its end,
and killing its whole process group (for actors/tools/sandbox_run.py, which starts them).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
from collections.abc import Callable

CHUNK_BYTES = 1 << 16


async def stream(fd: int, take: Callable[[bytes], None]) -> None:
    """What a pipe carries, to `take` as it comes, until its writers close it."""
    os.set_blocking(fd, False)
    while True:
        await readable(fd)
        try:
            chunk = os.read(fd, CHUNK_BYTES)
        except BlockingIOError:
            continue
        if not chunk:
            return
        take(chunk)


async def readable(fd: int) -> None:
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()

    def now() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(fd, now)
    try:
        await ready
    finally:
        loop.remove_reader(fd)


async def exited(process: subprocess.Popen[bytes]) -> int:
    """The process's exit code once it has ended (its pidfd turns readable), reaped."""
    if process.poll() is None:
        pidfd = os.pidfd_open(process.pid)
        try:
            await readable(pidfd)
        finally:
            os.close(pidfd)
    return process.wait()


async def kill_group(process: subprocess.Popen[bytes], grace_s: float) -> None:
    """SIGTERM to the process's whole group, SIGKILL after a grace; then reap it. A sandbox
    dies with bubblewrap, and all that runs in it with the sandbox."""
    for signum in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signum)
        try:
            async with asyncio.timeout(grace_s):
                await exited(process)
        except TimeoutError:
            continue
        if signum == signal.SIGTERM:
            # The leader is gone; whatever it started in the group gets the SIGKILL too.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
        return


def closed(*fds: int) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)
