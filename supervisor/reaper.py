"""The reaper of a Ray that Grove started on this machine: a process of its own that Grove tells
the pids of Ray's services (one a line on its stdin), that keeps track of everything they
start, and that kills all of it when Grove ends, however it ends (its stdin closes, even when
Grove is killed with SIGKILL). `done` on a line first says Grove stopped Ray itself.

Ray's services die with Grove, but the agents its raylet starts may not: after a SIGKILL they
wait minutes on a GCS that is gone. Run as a script (`python -S reaper.py`), standard library
only, so it starts in milliseconds; a look at /proc every POLL_S costs about 3 ms.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time

POLL_S = 2.0
ROUNDS = 5  # a process that starts while the others die is found on a later round
ROUND_PAUSE_S = 0.2
Table = dict[int, tuple[int, int, bytes]]  # pid -> (parent pid, process group, start time)


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
            table[int(entry)] = (int(fields[1]), int(fields[2]), fields[19])
    return table


class Tracked:
    """Ray's processes and all they started, each known by its pid and start time."""

    def __init__(self) -> None:
        self.known: dict[int, bytes] = {}
        self.groups: set[int] = set()
        self.born_after = processes()[os.getpid()][2]  # orphans older than the reaper are not ours

    def add_root(self, pid: int, table: Table) -> None:
        if pid in table:
            self.known[pid] = table[pid][2]
            self.groups.add(table[pid][1])

    def follow(self, table: Table, *, orphans: bool = False) -> None:
        """Add the descendants of what is known; with `orphans`, also processes the kernel
        gave to init from the process groups of Ray's services since the reaper started."""
        grew = True
        while grew:
            grew = False
            for pid, (parent, group, started) in table.items():
                if pid in self.known or pid == os.getpid():
                    continue
                ours = (
                    parent in self.known and table.get(parent, (0, 0, b""))[2] == self.known[parent]
                )
                stray = orphans and parent == 1 and group in self.groups
                if ours or (stray and int(started) >= int(self.born_after)):
                    self.known[pid] = started
                    grew = True

    def alive(self, table: Table) -> list[int]:
        return [
            pid for pid, started in self.known.items() if table.get(pid, (0, 0, b""))[2] == started
        ]


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl+C is for Grove; its end is ours
    tracked = Tracked()
    pending = b""
    orderly = False
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
                orderly = orderly or line.strip() == b"done"
        tracked.follow(table)
    for _ in range(ROUNDS):
        table = processes()
        # After a sudden end, what Ray's raylet started just before it may be unknown yet.
        tracked.follow(table, orphans=not orderly)
        left = tracked.alive(table)
        if not left:
            return
        for pid in left:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(ROUND_PAUSE_S)


if __name__ == "__main__":
    main()
