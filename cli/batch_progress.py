"""`grove batch` progress on screen: a rich bar on a terminal, a plain line every 10 s
otherwise. Presentation only: counting and texts are supervisor/batch/summary.py's.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Protocol, TextIO

from grove.supervisor.batch.summary import Totals, progress_line, rate_and_eta

PLAIN_EVERY_S = 10.0


class Progress(Protocol):
    def update(self, totals: Totals) -> None: ...

    def close(self) -> None: ...


class PlainProgress:
    """stderr is not a terminal: one progress line at most every `every_s` seconds."""

    def __init__(
        self,
        out: TextIO,
        *,
        every_s: float = PLAIN_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.out = out
        self.every_s = every_s
        self.clock = clock
        self.started = clock()
        self.last_line = self.started

    def update(self, totals: Totals) -> None:
        now = self.clock()
        if now - self.last_line >= self.every_s:
            self.last_line = now
            self.out.write(progress_line(totals, now - self.started) + "\n")
            self.out.flush()

    def close(self) -> None:
        """Nothing to tear down: every line is already written."""


class RichProgress:
    """A terminal: a live bar with done/total, failures, rate, ETA, tokens and cost."""

    def __init__(self, out: TextIO, total: int) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn
        from rich.progress import Progress as RichBar

        self.started = time.monotonic()
        self.bar = RichBar(
            TextColumn("batch"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[failed]} failed"),
            TextColumn("{task.fields[rate]}"),
            TextColumn("ETA {task.fields[eta]}"),
            TextColumn("{task.fields[tokens]} tokens"),
            TextColumn("${task.fields[cost]}"),
            console=Console(file=out),
        )
        self.task = self.bar.add_task(
            "batch", total=total, failed=0, rate="? tasks/s", eta="?", tokens="0", cost="0.0000"
        )
        self.bar.start()

    def update(self, totals: Totals) -> None:
        rate, eta = rate_and_eta(totals, time.monotonic() - self.started)
        self.bar.update(
            self.task,
            completed=totals.done,
            failed=totals.failed,
            rate=rate,
            eta=eta,
            tokens=f"{totals.tokens:,}",
            cost=f"{totals.cost_usd:.4f}",
        )

    def close(self) -> None:
        self.bar.stop()


def progress_display(total: int) -> Progress:
    """A bar when stderr is a terminal, else a plain line every PLAIN_EVERY_S seconds."""
    return RichProgress(sys.stderr, total) if sys.stderr.isatty() else PlainProgress(sys.stderr)
