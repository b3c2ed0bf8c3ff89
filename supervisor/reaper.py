"""The reaper of a Ray that Grove started on this machine: a process of its own that Grove tells
the pids of Ray's services (one a line on its stdin), that keeps track of everything they
start, and that kills all of it when Grove ends, however it ends (its stdin closes, even when
Grove is killed with SIGKILL).

Ray's services die with Grove, but the agents its raylet starts may not: after a SIGKILL they
wait minutes on a GCS that is gone. Each worker the raylet starts takes a process group of its
own, and one started since the last look at /proc is given to init when the raylet dies with
Grove, so at the end the reaper also takes every process whose environment carries the mark
Grove gave the raylet (its only argument, `NAME=VALUE`; the raylet's agents, workers and their
tools inherit it). Run as a script (`python -S reaper.py MARK`), standard library only, so it
starts in milliseconds; a look at /proc every POLL_S costs about 3 ms.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import time

MARK_VARIABLE = "GROVE_RAY_OWNER"  # its value: one LocalRay's own random id
POLL_S = 2.0
ROUNDS = 5  # a process that starts while the others die is found on a later round
ROUND_PAUSE_S = 0.2
Table = dict[int, tuple[int, bytes]]  # pid -> (parent pid, start time)


def processes() -> Table:
    table: Table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rpartition(b")")[2].split()
        except OSError:
            continue
        if fields[0] != b"Z":
            table[int(entry)] = (int(fields[1]), fields[19])
    return table


def carries(pid: int, mark: bytes) -> bool:
    """Whether the process's environment (as it started) holds `mark`; False for another
    user's process."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as environ:
            return mark in environ.read().split(b"\0")
    except OSError:
        return False


class Tracked:
    """Ray's processes and all they started, each known by its pid and start time."""

    def __init__(self, mark: bytes) -> None:
        self.known: dict[int, bytes] = {}
        self.mark = mark

    def add_root(self, pid: int, table: Table) -> None:
        if pid in table:
            self.known[pid] = table[pid][1]

    def take_marked(self, table: Table) -> None:
        """Add every process that carries the mark, wherever it is now."""
        for pid, (_, started) in table.items():
            if pid not in self.known and pid != os.getpid() and carries(pid, self.mark):
                self.known[pid] = started

    def follow(self, table: Table) -> None:
        """Add the descendants of what is known."""
        grew = True
        while grew:
            grew = False
            for pid, (parent, started) in table.items():
                if pid in self.known or pid == os.getpid():
                    continue
                if parent in self.known and table.get(parent, (0, b""))[1] == self.known[parent]:
                    self.known[pid] = started
                    grew = True

    def alive(self, table: Table) -> list[int]:
        return [
            pid for pid, started in self.known.items() if table.get(pid, (0, b""))[1] == started
        ]


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl+C is for Grove; its end is ours
    tracked = Tracked(sys.argv[1].encode())
    pending = b""
    while True:
        ready, _, _ = select.select([0], [], [], POLL_S)
        table = processes()
        if ready:
            chunk = os.read(0, 4096)
            if not chunk:
                break
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                if line.strip().isdigit():
                    tracked.add_root(int(line), table)
        tracked.follow(table)
    for _ in range(ROUNDS):
        table = processes()
        tracked.take_marked(table)
        tracked.follow(table)
        left = tracked.alive(table)
        if not left:
            return
        for pid in left:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(ROUND_PAUSE_S)


if __name__ == "__main__":
    main()
