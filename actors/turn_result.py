"""What a turn hands back: the messages it produced (`NewEntry`) and its `TurnResult`. A leaf,
so that whoever only reads results (the service's clients) does not load the turn loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from grove.providers.base import Usage


@dataclass(frozen=True, kw_only=True, slots=True)
class NewEntry:
    """A message the turn produced, for the supervisor to persist."""

    kind: str
    content: str
    data: dict[str, Any]


@dataclass(kw_only=True, slots=True)
class TurnResult:
    entries: list[NewEntry] = field(default_factory=list)
    text: str = ""
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    saved_usd: float = 0.0  # what provider caching saved (see actors/agent/metering.py reply_data)
    stop_reason: str | None = None
    error: str | None = None
    cancelled: bool = False
    # An agent in a worktree: its branch and diff stat since the fork.
    worktree: dict[str, str] | None = None
    # Typed results: the checked answer (JSON data; the caller's Grove makes it an instance
    # of its model), or why the last answer was not one once the retries ran out, and how
    # many answers went back to the model (their requests are in `usage`, and apart in
    # `retry_usage`).
    output: Any = None
    output_error: str | None = None
    output_retries: int = 0
    retry_usage: Usage = field(default_factory=Usage)

    @property
    def ok(self) -> bool:
        return self.error is None and not self.cancelled
