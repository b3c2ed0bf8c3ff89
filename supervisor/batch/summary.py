"""The summarize stage of a batch: `Totals` (what a run has done so far, counted from its
records), the progress line and the summary line. Texts only; showing them is the caller's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from grove.providers.plurals import counted


@dataclass(kw_only=True, slots=True)
class Totals:
    """What this run has done so far. `total` counts the tasks it set out to run."""

    total: int = 0
    ok: int = 0
    failed: int = 0
    invalid_output: int = 0  # of failed: answers that stayed malformed after their retries
    malformed: int = 0
    skipped: int = 0
    over_budget: int = 0  # not run: the tree's budget was spent
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0  # of input_tokens
    cost_usd: float = 0.0
    saved_usd: float = 0.0  # what provider caching saved
    output_retries: int = 0  # typed answers sent back to the model
    retry_tokens: int = 0  # of the tokens: what those retries' requests used

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
            if record["status"] == "invalid_output":
                self.invalid_output += 1
        usage = record.get("usage") or {}
        self.input_tokens += int(usage.get("input_tokens", 0))
        self.output_tokens += int(usage.get("output_tokens", 0))
        self.cache_read_tokens += int(usage.get("cache_read_tokens", 0))
        self.cost_usd += float(record.get("cost_usd") or 0.0)
        self.saved_usd += float(record.get("saved_usd") or 0.0)
        self.output_retries += int(record.get("output_retries") or 0)
        retried = record.get("retry_usage") or {}
        self.retry_tokens += int(retried.get("input_tokens", 0)) + int(
            retried.get("output_tokens", 0)
        )


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
    text = (
        f"{head}: {totals.ok} ok, {totals.failed + totals.malformed} failed{failed_text(totals)}, "
        f"{totals.skipped} skipped (already ok), {totals.tokens:,} tokens{cached_text(totals)}"
        f"{retried_text(totals)}, ${totals.cost_usd:.4f}{saved_text(totals)}, {wall_s:.1f}s. "
        f"Output: {output}"
    )
    if totals.over_budget:
        text += (
            f". {counted(totals.over_budget, 'task')} skipped: the budget was spent; a rerun "
            "with a larger budget runs just those"
        )
    if interrupted > 0:
        text += f". {counted(interrupted, 'unfinished task')} run again on the next run"
    return text


def failed_text(totals: Totals) -> str:
    """` (3 malformed lines, 1 invalid output)`: the failures that are not the tasks' turns."""
    kinds = []
    if totals.malformed:
        kinds.append(f"{totals.malformed} malformed line{'s' if totals.malformed != 1 else ''}")
    if totals.invalid_output:
        kinds.append(f"{totals.invalid_output} invalid output")
    return f" ({', '.join(kinds)})" if kinds else ""


def retried_text(totals: Totals) -> str:
    """` (1,234 of them in 200 output retries)` when typed answers were sent back."""
    if not totals.output_retries:
        return ""
    plural = "y" if totals.output_retries == 1 else "ies"
    return f" ({totals.retry_tokens:,} of them in {totals.output_retries} output retr{plural})"


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
