"""A `grove run` killed with SIGKILL leaves no process behind: Ray's services, its two agents
(which otherwise wait minutes on a GCS that is gone), the hosts, a worker the raylet started
just before. And the Ray that Grove starts has no processes Grove does not use (the
autoscaler's monitor, the log monitor).
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

from grove.supervisor.local_ray import REAPER
from grove.supervisor.reaper import MARK_VARIABLE, POLL_S
from tests.security.commands import Place
from tests.security.test_ray_loopback import process_tree

SLOW_REPLY = "[[sim ttft_ms=120000 reply=late]] take your time"
AGENTS = {"ray::DashboardAgent", "ray::RuntimeEnvAgent"}


def identity(pid: int) -> tuple[int, str] | None:
    """The process and its start time (so a reused pid is not taken for it); None if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()
    return (pid, fields[19]) if fields[0] != "Z" else None


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def in_session(session: int) -> list[int]:
    """The live processes of the session `session` (Ray's workers each take a process group
    of their own, but stay in the session)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rpartition(")")[2].split()
            except OSError:
                continue
            if int(fields[3]) == session and fields[0] != "Z":
                found.append(int(entry.name))
    return found


def test_a_killed_grove_run_leaves_no_process_behind(place: Place) -> None:
    command = [sys.executable, "-m", "grove.cli.app", "run", "--simulate", "--model", "gpt-5-mini"]
    running = subprocess.Popen(
        [*command, SLOW_REPLY],
        env=place.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own session: the test kills nothing but what it started
    )
    try:
        deadline = time.monotonic() + 180
        tree: list[int] = []
        # Up when the agents and a worker are: the reply is 120 s away.
        while time.monotonic() < deadline:
            tree = process_tree(running.pid)
            lines = [command_line(pid) for pid in tree]
            if {line.strip() for line in lines} >= AGENTS and any(
                "ray::" in line and line.strip() not in AGENTS for line in lines
            ):
                break
            assert running.poll() is None, "grove run ended early"
            time.sleep(0.5)
        else:
            raise AssertionError(f"Ray never came up: {[command_line(p) for p in tree]}")
        lines = [command_line(pid) for pid in tree]
        assert not [line for line in lines if "monitor.py" in line], lines  # nor log_monitor
        started = {found for pid in tree if (found := identity(pid)) is not None}
        assert len(started) >= 6  # grove, the reaper, GCS, raylet, two agents, workers
    finally:
        os.kill(running.pid, signal.SIGKILL)
        running.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        left = [found for pid, _ in started if (found := identity(pid)) in started]
        if not left and not in_session(running.pid):
            break
        time.sleep(0.5)
    leftovers = [command_line(pid) for pid, _ in started if identity(pid) in started]
    leftovers += [command_line(pid) for pid in in_session(running.pid)]  # started since
    assert leftovers == [], leftovers


# A raylet's part: told to go, it starts a worker in a process group of its own and dies.
RAYLET = """
import subprocess, sys
sys.stdin.readline()
sleep = [sys.executable, "-c", "import time; time.sleep(120)"]
quiet = subprocess.DEVNULL
worker = subprocess.Popen(sleep, process_group=0, stdin=quiet, stdout=quiet)
print(worker.pid, flush=True)
"""


def test_the_reaper_kills_a_worker_it_never_saw_after_its_raylet_died() -> None:
    """A worker started since the reaper last looked at /proc, whose raylet dies with Grove,
    is given to init in a process group of its own: the mark in its environment (the raylet's,
    inherited) is how the reaper still finds it."""
    mark = secrets.token_hex(8)
    reaper = subprocess.Popen(
        [sys.executable, "-S", str(REAPER), f"{MARK_VARIABLE}={mark}"],
        stdin=subprocess.PIPE,
        start_new_session=True,
    )
    assert reaper.stdin is not None
    raylet = subprocess.Popen(
        [sys.executable, "-c", RAYLET],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, MARK_VARIABLE: mark},
    )
    worker: tuple[int, str] | None = None
    try:
        reaper.stdin.write(f"{raylet.pid}\n".encode())
        reaper.stdin.flush()
        time.sleep(POLL_S / 4)  # the reaper has looked; its next look is well after the end
        worker = identity(int(raylet.communicate("go\n", timeout=60)[0]))
        assert worker is not None
        assert identity(raylet.pid) is None
        reaper.stdin.close()  # Grove's end
        reaper.wait(timeout=60)
        assert identity(worker[0]) != worker
    finally:
        if worker is not None and identity(worker[0]) == worker:
            os.kill(worker[0], signal.SIGKILL)
        if reaper.poll() is None:
            reaper.kill()
            reaper.wait()
