"""Routing a provider batch's results to its steps (SPEC 20): each step by its own custom id,
in whatever order the lines came; what names no step of it, or cannot be read, only counted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from grove.providers.batch_wire import BatchOutcome, BatchResults

MISSING = "missing"  # a step the results hold no readable line for


@dataclass(frozen=True, kw_only=True, slots=True)
class Routing:
    """Each step's outcome (None: missing), and what the batch's `BatchEnded` event counts:
    the outcomes by kind, `missing`, `unknown_ids` and `malformed_lines`."""

    outcomes: dict[str, BatchOutcome | None]
    counts: dict[str, int]

    @property
    def rejected(self) -> dict[str, int]:
        """The counts of lines mapped to no step, and of steps with no line, when any."""
        shown = ("missing", "unknown_ids", "malformed_lines")
        kept = {key: self.counts.get(key, 0) for key in shown}
        return kept if any(kept.values()) else {}


def routed(members: Mapping[str, str], results: BatchResults) -> Routing:
    """`members` (custom id -> step: the steps the batch still answers) each given the
    outcome under its own custom id. A succeeded line without a reply counts as missing."""
    outcomes: dict[str, BatchOutcome | None] = {}
    counts: Counter[str] = Counter()
    for custom_id, step in members.items():
        outcome = results.outcomes.get(custom_id)
        if outcome is not None and outcome.custom_id != custom_id:
            outcome = None  # filed under another id: never someone else's answer
        if outcome is not None and outcome.kind == "succeeded" and outcome.turn is None:
            outcome = None
        outcomes[step] = outcome
        counts[outcome.kind if outcome is not None else MISSING] += 1
    counts["unknown_ids"] = results.unknown_ids
    counts["malformed_lines"] = results.malformed_lines
    return Routing(outcomes=outcomes, counts=dict(counts))
