"""`grove batch` progress: a rich bar on a terminal, periodic plain lines otherwise, the summary.
Presentation only: counting is `Totals`, running tasks is batch.py's business.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TextIO

PLAIN_EVERY_S = 10.0


@dataclass(kw_only=True, slots=True)
class Totals:
    """What this run has done so far. `total` counts the tasks it set out to run."""

    total: int = 0
    ok: int = 0
    failed: int = 0
    malformed: int = 0
    skipped: int = 0
    over_budget: int = 0  # not run: the tree's budget was spent
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0  # of input_tokens
    cost_usd: float = 0.0
    saved_usd: float = 0.0  # what provider caching saved

    @property
    def done(self) -> int:
        return self.ok + self.failed + self.over_budget

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def count(self, record: dict[str, Any]) -> None:
        """Count one task record of this run."""
        if record["status"] == "ok":
            self.ok += 1
        elif record["status"] == "skipped":
            self.over_budget += 1
        else:
            self.failed += 1
        usage = record.get("usage") or {}
        self.input_tokens += int(usage.get("input_tokens", 0))
        self.output_tokens += int(usage.get("output_tokens", 0))
        self.cache_read_tokens += int(usage.get("cache_read_tokens", 0))
        self.cost_usd += float(record.get("cost_usd") or 0.0)
        self.saved_usd += float(record.get("saved_usd") or 0.0)


def duration_text(seconds: float) -> str:
    """`42s`, `3m05s`, `2h07m`."""
    whole = max(round(seconds), 0)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def rate_and_eta(totals: Totals, elapsed_s: float) -> tuple[str, str]:
    """Tasks per second so far and the time left at that rate ('?' before the first result)."""
    if totals.done == 0 or elapsed_s <= 0:
        return "? tasks/s", "?"
    rate = totals.done / elapsed_s
    return f"{rate:.1f} tasks/s", duration_text((totals.total - totals.done) / rate)


def progress_line(totals: Totals, elapsed_s: float) -> str:
    rate, eta = rate_and_eta(totals, elapsed_s)
    return (
        f"batch: {totals.done}/{totals.total} done, {totals.failed} failed, {rate}, "
        f"ETA {eta}, {totals.tokens:,} tokens, ${totals.cost_usd:.4f}"
    )


def summary_line(totals: Totals, wall_s: float, output: str, *, interrupted: int = -1) -> str:
    """The last line of every run; `interrupted` counts the tasks left in flight by Ctrl+C."""
    head = "Batch interrupted" if interrupted >= 0 else "Batch finished"
    malformed = (
        f" ({totals.malformed} malformed line{'s' if totals.malformed != 1 else ''})"
        if totals.malformed
        else ""
    )
    text = (
        f"{head}: {totals.ok} ok, {totals.failed + totals.malformed} failed{malformed}, "
        f"{totals.skipped} skipped (already ok), {totals.tokens:,} tokens{cached_text(totals)}, "
        f"${totals.cost_usd:.4f}{saved_text(totals)}, {wall_s:.1f}s. Output: {output}"
    )
    if totals.over_budget:
        text += (
            f". {totals.over_budget} task(s) skipped: the budget was spent; a rerun with a larger "
            "budget runs just those"
        )
    if interrupted > 0:
        text += f". {interrupted} unfinished task(s) run again on the next run"
    return text


def cached_text(totals: Totals) -> str:
    """` (95% of input from cache)` when caching read any of it."""
    if not totals.cache_read_tokens or not totals.input_tokens:
        return ""
    return f" ({totals.cache_read_tokens / totals.input_tokens:.0%} of input from cache)"


def saved_text(totals: Totals) -> str:
    """` (caching saved $54.10)` when it saved or cost anything."""
    if not totals.saved_usd:
        return ""
    if totals.saved_usd < 0:
        return f" (caching cost ${-totals.saved_usd:.4f} more)"
    return f" (caching saved ${totals.saved_usd:.4f})"


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
