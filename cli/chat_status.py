"""The live chat's status line: the focused agent, its model and thinking, the turn's tokens and
cost (estimated while it streams, as billed once it ends) and how full its context is.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from grove.providers.base import Usage
from grove.providers.errors import GroveError
from grove.providers.pricing import cost_usd
from grove.supervisor.agent_tiers import marked_tier, tier_of
from grove.supervisor.context import CHARS_PER_TOKEN

if TYPE_CHECKING:
    from grove.actors.turn_result import TurnResult
    from grove.supervisor.contract import GroveAPI

SHORT_ID = 8
# Streamed kinds that are the model's own output (what its reply is billed for).
OUTPUT_KINDS = ("text", "thinking", "tool_call")
# The status line's own reads are told apart from what a person typed in the event log.
STATUS_ORIGIN = "repl-status"


@dataclass(frozen=True, slots=True)
class Status:
    """What the status line shows; `estimated` while the turn streams."""

    agent: str = ""
    model: str | None = None
    thinking: str | None = None
    tier: str = "standard"
    used: int = 0  # context tokens before this turn
    window: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    estimated: bool = False
    queued: int = 0


def status_text(status: Status) -> str:
    """One line: `agent · model/thinking · tier · tokens · cost · context · queue` (the tier
    only when not standard)."""
    parts = [status.agent or "?"]
    parts.append(
        "no model" if status.model is None else f"{status.model}/{status.thinking or 'default'}"
    )
    tier = marked_tier(status.tier)
    if tier is not None:
        parts.append(f"{tier} tier")
    if status.estimated:
        parts.append(f"~{status.output_tokens:,} tokens out")
    elif status.input_tokens or status.output_tokens:
        parts.append(f"{status.input_tokens:,} in, {status.output_tokens:,} out")
    if status.cost_usd:
        parts.append(f"{'~' if status.estimated else ''}${status.cost_usd:.4f}")
    if status.window:
        held = status.used + (status.output_tokens if status.estimated else 0)
        parts.append(f"{held / status.window:.0%} context")
    if status.queued:
        parts.append(f"{status.queued} queued")
    return " · ".join(parts)


class StatusLine:
    """The status of the session's focused agent, read again after each turn and command, and
    counted up as a turn streams; `changed` is told each time (it redraws, throttled)."""

    def __init__(self, grove: GroveAPI, session: str, changed: Callable[[], None]) -> None:
        self._grove = grove
        self._session = session
        self._changed = changed
        self._lock = threading.Lock()
        self._status = Status()
        self._streamed_chars = 0

    def text(self) -> str:
        with self._lock:
            return status_text(self._status)

    def _update(self, **fields: object) -> None:
        with self._lock:
            self._status = replace(self._status, **fields)  # type: ignore[arg-type]
        self._changed()

    def refresh(self) -> None:
        """Read the focused agent, its model and its context use again."""
        try:
            focus = self._grove.focus(self._session)
            record = self._grove.agent(focus)
            context = self._grove.dispatch(self._session, "/context", STATUS_ORIGIN)
        except GroveError:  # the line keeps what it showed; the chat goes on
            return
        self._update(
            agent=record.name or focus[:SHORT_ID],
            model=record.model,
            thinking=record.thinking_level,
            tier=tier_of(record),
            used=int(context.data.get("used", 0)) if context.ok else 0,
            window=int(context.data.get("window", 0)) if context.ok else 0,
        )

    def queued(self, count: int) -> None:
        self._update(queued=count)

    def turn_began(self) -> None:
        with self._lock:
            self._streamed_chars = 0
        self._update(input_tokens=0, output_tokens=0, cost_usd=0.0, estimated=True)

    def seen(self, kind: str, text: str) -> None:
        """A streamed delta: the reply's tokens and cost so far, estimated."""
        if kind not in OUTPUT_KINDS:
            return
        with self._lock:
            self._streamed_chars += len(text)
            tokens = -(-self._streamed_chars // CHARS_PER_TOKEN)  # as the supervisor estimates
            model, used = self._status.model, self._status.used
        usage = Usage(input_tokens=used, output_tokens=tokens)
        self._update(output_tokens=tokens, cost_usd=cost_usd(model, usage) if model else 0.0)

    def turn_ended(self, result: TurnResult | None) -> None:
        """The turn's tokens and cost as billed (None: it failed before a result)."""
        if result is None:
            self._update(estimated=False)
            return
        self._update(
            input_tokens=result.usage.input_tokens,
            output_tokens=result.usage.output_tokens,
            cost_usd=result.cost_usd,
            estimated=False,
        )
