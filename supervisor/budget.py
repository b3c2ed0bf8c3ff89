"""Tree budgets: `Budget` (tokens, cost, seconds, turns, the soft share), what a tree has used,
and the check before each request of any agent in it (children and reviewers draw on the root's).
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from providers import catalog
from providers.base import Usage
from providers.errors import GroveError
from supervisor.errors import BUDGET_EXHAUSTED, CommandError
from supervisor.store.records import AgentRecord
from supervisor.usage import UsageTotals, is_billed, subtree

if TYPE_CHECKING:
    from supervisor.service import SupervisorCore


LIMITS = ("tokens", "cost_usd", "seconds", "turns")


class BudgetExhausted(GroveError):
    """The tree's budget is spent; the text is `Budget exhausted: <what> <used>/<limit>`."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Budget:
    """Limits over a whole tree; None leaves that one open. `soft` is the share of a limit at
    which a BudgetWarning goes out, once."""

    tokens: int | None = None
    cost_usd: float | None = None
    seconds: float | None = None
    turns: int | None = None
    soft: float = 0.8

    def __post_init__(self) -> None:
        for name in LIMITS:
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not math.isfinite(value) or value <= 0
            ):
                raise ValueError(f"budget {name} must be a positive number, got {value!r}")
        if not 0 < self.soft <= 1:
            raise ValueError(f"budget soft must be above 0 and at most 1, got {self.soft!r}")
        if self.empty:
            raise ValueError("a budget needs at least one of tokens, cost_usd, seconds, turns")

    @property
    def empty(self) -> bool:
        return all(getattr(self, name) is None for name in LIMITS)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Budget:
        return cls(**{key: data.get(key) for key in LIMITS}, soft=float(data.get("soft", 0.8)))


@dataclass(slots=True)
class TreeSpend:
    """What a tree has used since its root was made."""

    started: float
    tokens: int = 0
    cost_usd: float = 0.0
    turns: int = 0
    warned: bool = False
    held_tokens: int = 0  # reserved by requests in flight, settled when each ends
    held_cost: float = 0.0
    holds: int = 0  # requests in flight (a count: the held cost is a float sum)
    settled: asyncio.Condition = field(default_factory=asyncio.Condition)

    def fits(self, budget: Budget, tokens: int, cost: float, *, held: bool) -> bool:
        """Whether `tokens` and `cost` more stay within the limits (counting what requests
        in flight hold, when `held`)."""
        extra_tokens = tokens + (self.held_tokens if held else 0)
        extra_cost = cost + (self.held_cost if held else 0.0)
        return (budget.tokens is None or self.tokens + extra_tokens <= budget.tokens) and (
            budget.cost_usd is None or self.cost_usd + extra_cost <= budget.cost_usd
        )

    def used(self, what: str, now: float) -> float:
        return now - self.started if what == "seconds" else float(getattr(self, what))

    def check(self, budget: Budget, *, new_turn: bool) -> str | None:
        """Raise BudgetExhausted when a limit is reached (the turn limit only stops a new
        turn: the turn that reached it may finish); else the warning text once a limit passes
        its soft share (only a request's check gives it out), else None."""
        now = time.time()
        warning = None
        for what in LIMITS:
            limit = getattr(budget, what)
            if limit is None:
                continue
            used = self.used(what, now)
            if used >= limit and (new_turn or what != "turns"):
                raise BudgetExhausted(f"{BUDGET_EXHAUSTED}{what} {shown(used)}/{shown(limit)}")
            if used >= budget.soft * limit and not self.warned and warning is None:
                warning = f"Budget warning: {what} {shown(used)}/{shown(limit)}"
        if warning is None or new_turn:
            return None
        self.warned = True
        return warning


def shown(value: float) -> str:
    """`1,234` for whole numbers, `0.0123` for costs."""
    return f"{value:,.0f}" if float(value).is_integer() or value >= 100 else f"{value:.4g}"


class BudgetDesk:
    """The supervisor's side of budgets: each budgeted tree's spend, the hold before each
    request (and the check before each new turn or fork) of an agent in it, the settling after."""

    def __init__(self, core: SupervisorCore) -> None:
        self._core = core
        self._spends: dict[str, TreeSpend] = {}  # by root uuid, loaded on first use

    def tree(self, record: AgentRecord) -> tuple[AgentRecord, Budget] | None:
        """The root whose budget the agent draws on, and that budget (None: no budget)."""
        root_uuid = record.metadata.get("budget_root")
        if not isinstance(root_uuid, str):
            return None
        root = record if root_uuid == record.uuid else self._core.store.get_agent(root_uuid)
        data = root.metadata.get("budget") if root is not None else None
        return (root, Budget.from_dict(data)) if root and isinstance(data, dict) else None

    def _spend(self, root: AgentRecord) -> TreeSpend:
        spend = self._spends.get(root.uuid)
        if spend is None:  # first use since this supervisor started: what the store holds
            totals, turns = UsageTotals(), 0
            for agent in subtree(self._core.store, root):
                for message in self._core.store.agent_messages(agent.uuid):
                    turns += message.kind == "user"
                    if is_billed(message):
                        totals.add(message)
            spend = self._spends[root.uuid] = TreeSpend(
                started=root.created_at,
                tokens=totals.input_tokens + totals.output_tokens,
                cost_usd=totals.cost_usd,
                turns=turns,
            )
        return spend

    async def reserve(self, uuid: str, tokens: int, output: int) -> tuple[str | None, Hold]:
        """Before a request of about `tokens` input and at most `output` output tokens: hold
        that much of the tree's budget (tokens and what they cost) until it is settled.
        While requests in flight hold what would leave no room, wait for them; when even
        settled use leaves none, raise BudgetExhausted (nothing is sent). Returns a warning
        text once past the soft share, and the hold."""
        record = self._core.agent(uuid)
        found = self.tree(record)
        if found is None:
            return None, (0, 0.0)
        root, budget = found
        spend = self._spend(root)
        if budget.tokens is not None and tokens > budget.tokens:
            raise BudgetExhausted(
                f"{BUDGET_EXHAUSTED}tokens: this request needs about {tokens:,}, more than the "
                f"whole budget of {budget.tokens:,}; nothing was sent"
            )
        warning = None
        async with spend.settled:
            while True:
                warning = spend.check(budget, new_turn=False) or warning
                # The output held is what is left of the token limit, up to `output`.
                room = None if budget.tokens is None else budget.tokens - spend.tokens
                if room is not None:
                    room -= spend.held_tokens
                held_output = output if room is None else min(output, room - tokens)
                need_tokens = tokens + max(held_output, 0)
                held = Usage(input_tokens=tokens, output_tokens=max(held_output, 0))
                need_cost = catalog.cost_usd(record.model or "", held)
                if held_output > 0 and spend.fits(budget, need_tokens, need_cost, held=True):
                    break
                if not spend.holds:  # nothing in flight will free room
                    raise BudgetExhausted(exhausted_text(budget, spend, need_tokens))
                await spend.settled.wait()  # requests in flight hold the room: wait for them
            spend.held_tokens += need_tokens
            spend.held_cost += need_cost
            spend.holds += 1
        if warning is not None:
            self._core.event("BudgetWarning", agent=uuid, root=root.uuid, text=warning)
        return warning, (need_tokens, need_cost)

    async def settle(self, uuid: str, hold: Hold, tokens: int, cost_usd: float) -> None:
        """A request ended: what it held goes back, what it used is counted."""
        found = self.tree(self._core.agent(uuid))
        if found is None:
            return
        spend = self._spend(found[0])
        async with spend.settled:
            spend.held_tokens -= hold[0]
            spend.held_cost -= hold[1]
            spend.holds -= 1
            if not spend.holds:
                spend.held_cost = 0.0  # no float residue once nothing is in flight
            spend.tokens += tokens
            spend.cost_usd += cost_usd
            spend.settled.notify_all()

    def before_turn(self, record: AgentRecord, count: bool) -> None:
        """A new turn (`count`: it counts as one) or a fork in a budgeted tree: refused at a
        limit."""
        found = self.tree(record)
        if found is None:
            return
        root, budget = found
        spend = self._spend(root)
        try:
            spend.check(budget, new_turn=True)
        except BudgetExhausted as exc:
            raise CommandError(str(exc)) from exc
        if count:
            spend.turns += 1


Hold = tuple[int, float]  # tokens and cost a request in flight holds


def exhausted_text(budget: Budget, spend: TreeSpend, need_tokens: int) -> str:
    """The limit the next request would pass, as `Budget exhausted: <what> <used>/<limit>`."""
    if budget.tokens is not None and spend.tokens + need_tokens > budget.tokens:
        return f"{BUDGET_EXHAUSTED}tokens {shown(spend.tokens)}/{shown(budget.tokens)}"
    return f"{BUDGET_EXHAUSTED}cost_usd {shown(spend.cost_usd)}/{shown(budget.cost_usd or 0)}"
