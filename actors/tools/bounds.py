"""How much one workspace tool call may do: a time limit, a number of directory entries, and a
stop flag its caller sets when the call is cancelled. The work checks them as it goes.

A thread cannot be stopped from outside, so work that runs in one must look: `WorkBudget.spend`
is called for every directory entry and every few thousand lines.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

TOOL_TIME_LIMIT_S = 30.0
MAX_ENTRIES = 200_000  # directory entries one call may visit


class WorkStopped(Exception):
    """The call ran out of time or entries, or was cancelled; `reason` says which."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(kw_only=True)
class WorkBudget:
    seconds: float = TOOL_TIME_LIMIT_S
    max_entries: int = MAX_ENTRIES
    started: float = field(default_factory=time.monotonic)
    cancelled: threading.Event = field(default_factory=threading.Event)
    entries: int = 0

    def spend(self, entries: int = 0) -> None:
        """Count `entries` visited; raise WorkStopped when the call must end."""
        self.entries += entries
        if self.cancelled.is_set():
            raise WorkStopped("cancelled")
        if self.entries > self.max_entries:
            raise WorkStopped(f"stopped after {self.max_entries:,} directory entries, the limit")
        if time.monotonic() - self.started > self.seconds:
            raise WorkStopped(f"stopped after {self.seconds:g} s, the time limit")
