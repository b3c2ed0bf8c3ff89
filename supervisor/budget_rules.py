"""What a budget is (`Budget`: tokens, cost, seconds, turns, and how it is kept) and how an
agent comes to draw on one: its tree's root's, or that of the fork_many it came from.
"""

from __future__ import annotations

import math
import time
import uuid as uuidlib
from dataclasses import asdict, dataclass, fields
from typing import Any

from grove.supervisor.config_agents import RESERVE_OUTPUT_TOKENS

LIMITS = ("tokens", "cost_usd", "seconds", "turns")
HARD_STOPS = ("finish", "cancel")


@dataclass(frozen=True, kw_only=True, slots=True)
class Budget:
    """Limits over a whole tree; None leaves that one open. `soft` is the share of a limit at
    which a BudgetWarning goes out, once. Each request holds its input and `reserve_output`
    tokens of reply (or its max_tokens, if fewer) until it ends, and starts only if that fits;
    `strict` lets the hold shrink to what is left and caps its max_tokens at it, so the limit
    is never passed; `hard_stop="cancel"` stops a reply that outgrows its hold when the budget
    has no more room."""

    tokens: int | None = None
    cost_usd: float | None = None
    seconds: float | None = None
    turns: int | None = None
    soft: float = 0.8
    reserve_output: int = RESERVE_OUTPUT_TOKENS
    strict: bool = False
    hard_stop: str = "finish"

    def __post_init__(self) -> None:
        for name in LIMITS:
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not math.isfinite(value) or value <= 0
            ):
                raise ValueError(f"budget {name} must be a positive number, got {value!r}")
        if not 0 < self.soft <= 1:
            raise ValueError(f"budget soft must be above 0 and at most 1, got {self.soft!r}")
        if isinstance(self.reserve_output, bool) or not (
            isinstance(self.reserve_output, int) and self.reserve_output > 0
        ):
            shown_value = repr(self.reserve_output)
            raise ValueError(
                f"budget reserve_output must be a positive whole number, got {shown_value}"
            )
        if self.hard_stop not in HARD_STOPS:
            raise ValueError(f"budget hard_stop is finish or cancel, not {self.hard_stop!r}")
        if self.empty:
            raise ValueError("a budget needs at least one of tokens, cost_usd, seconds, turns")

    @property
    def empty(self) -> bool:
        return all(getattr(self, name) is None for name in LIMITS)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Budget:
        return cls(**{key: data[key] for key in BUDGET_FIELDS if data.get(key) is not None})


BUDGET_FIELDS = tuple(entry.name for entry in fields(Budget))


# The metadata that says which budgets an agent draws on: its tree's root's (`budget_root`)
# and those of the fork_many calls it or an ancestor came from (`budget_groups`).
BUDGET_KEYS = ("budget_root", "budget_groups")


def budgeted(metadata: dict[str, Any]) -> bool:
    """Whether an agent with this metadata draws on a budget (its tree's or a fork group's)."""
    return any(key in metadata for key in BUDGET_KEYS)


def group_entry(budget: Budget, parent: str) -> dict[str, Any]:
    """The metadata entry that gives the children `parent` forks in one fork_many a budget of
    their own, on top of their tree's (their descendants inherit it)."""
    return {
        "id": str(uuidlib.uuid4()),
        "budget": budget.as_dict(),
        "started": time.time(),
        "parent": parent,
    }
