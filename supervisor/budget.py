"""Keeping budgets: what each budget's agents have used and hold, the hold before each request
(and the check before each turn or fork) of an agent that draws on one, the settling after.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from grove.providers import pricing
from grove.providers.base import CachePolicy, Tier, Usage
from grove.providers.errors import GroveError
from grove.supervisor.budget_rules import LIMITS, Budget
from grove.supervisor.errors import BUDGET_EXHAUSTED, CommandError
from grove.supervisor.store.records import AgentRecord
from grove.supervisor.usage import UsageTotals, is_billed, subtree

if TYPE_CHECKING:
    from grove.supervisor.core import SupervisorCore


# What a request too large for its budget's hold is told.
SMALLER_HOLD = " (a smaller [budget] reserve_output, or strict = true, lets it start)"

# How soon a request waiting for requests in flight to settle asks again.
BUDGET_POLL_S = 0.05


class BudgetExhausted(GroveError):
    """The tree's budget is spent; the text is `Budget exhausted: <what> <used>/<limit>`."""


@dataclass(frozen=True, slots=True)
class Scope:
    """One budget an agent draws on: its tree's (`key` is the root's uuid) or a fork group's."""

    key: str
    top: str  # the agent at or below which the scope's members are: the root, a fork's parent
    budget: Budget
    started: float
    group: bool


@dataclass(slots=True)
class TreeSpend:
    """What a scope's agents have used since it began, and what requests in flight hold."""

    started: float
    tokens: int = 0
    cost_usd: float = 0.0
    turns: int = 0
    warned: bool = False
    held_tokens: int = 0  # reserved by requests in flight, settled when each ends
    held_cost: float = 0.0
    holds: int = 0  # requests in flight (a count: the held cost is a float sum)

    def room(self, budget: Budget) -> tuple[float, float]:
        """Tokens and cost left once what is settled and held is counted (inf: no limit)."""
        tokens = math.inf if budget.tokens is None else budget.tokens - self.tokens
        cost = math.inf if budget.cost_usd is None else budget.cost_usd - self.cost_usd
        return tokens - self.held_tokens, cost - self.held_cost

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

    def take(self, tokens: int, cost: float) -> None:
        self.held_tokens += tokens
        self.held_cost += cost

    def settle(self, hold: Hold, tokens: int, cost: float) -> None:
        self.held_tokens -= hold.tokens
        self.held_cost -= hold.cost_usd
        self.holds -= 1
        if not self.holds:
            self.held_cost = 0.0  # no float residue once nothing is in flight
        self.count(tokens, cost)

    def count(self, tokens: int, cost: float) -> None:
        self.tokens += tokens
        self.cost_usd += cost


@dataclass(frozen=True, slots=True)
class Hold:
    """What one request in flight holds of its budgets until it is settled: `tokens` (its
    input and `output`) and their cost; `strict`: its max_tokens is capped at `output`;
    `cancel`: a reply that outgrows `output` asks for more, and stops when there is none."""

    tokens: int = 0
    cost_usd: float = 0.0
    output: int = 0
    strict: bool = False
    cancel: bool = False
    warning: str | None = None
    tier: Tier = "standard"  # the price tier its request goes on, which its cost is counted at


def shown(value: float) -> str:
    """`1,234` for whole numbers, `0.0123` for costs."""
    return f"{value:,.0f}" if float(value).is_integer() or value >= 100 else f"{value:.4g}"


class BudgetDesk:
    """The supervisor's side of budgets: each scope's spend, the hold before each request
    (and the check before each new turn or fork) of an agent in it, the settling after.
    Nothing here awaits: each hold is taken whole on the supervisor's event loop, atomic across
    all the hosts and nodes that ask."""

    def __init__(self, core: SupervisorCore) -> None:
        self._core = core
        self._spends: dict[str, TreeSpend] = {}  # by scope key, loaded on first use
        self._scopes: dict[str, tuple[Scope, ...]] = {}  # by agent: budgets never change
        self._open: dict[str, list[Hold]] = {}  # holds not settled yet, by agent

    def scopes(self, uuid: str, record: AgentRecord | None = None) -> tuple[Scope, ...]:
        """The budgets the agent draws on: its tree's, then those of its fork groups."""
        known = self._scopes.get(uuid)
        if known is not None:
            return known
        if record is None:
            record = self._core.agent(uuid)
        found: list[Scope] = []
        root_uuid = record.metadata.get("budget_root")
        root = record if root_uuid == record.uuid else None
        if isinstance(root_uuid, str) and root is None:
            root = self._core.store.get_agent(root_uuid)
        data = root.metadata.get("budget") if root is not None else None
        if root is not None and isinstance(data, dict):
            found.append(
                Scope(root.uuid, root.uuid, Budget.from_dict(data), root.created_at, False)
            )
        for group in record.metadata.get("budget_groups") or ():
            budget = Budget.from_dict(group["budget"])
            found.append(Scope(group["id"], group["parent"], budget, group["started"], True))
        scopes = self._scopes[record.uuid] = tuple(found)
        return scopes

    def _spend(self, scope: Scope) -> TreeSpend:
        spend = self._spends.get(scope.key)
        if spend is None:  # first use since this supervisor started: what the store holds
            totals, turns = UsageTotals(), 0
            for agent in subtree(self._core.store, self._core.agent(scope.top)):
                groups = agent.metadata.get("budget_groups") or ()
                if scope.group and all(group["id"] != scope.key for group in groups):
                    continue
                for message in self._core.store.agent_messages(agent.uuid):
                    turns += message.kind == "user"
                    if is_billed(message):
                        totals.add(message)
            spend = self._spends[scope.key] = TreeSpend(
                started=scope.started,
                tokens=totals.input_tokens + totals.output_tokens,
                cost_usd=totals.cost_usd,
                turns=turns,
            )
        return spend

    def try_reserve(
        self,
        uuid: str,
        model: str,
        tokens: int,
        max_tokens: int | None,
        tier: Tier = "standard",
    ) -> Hold | None:
        """Before a request of about `tokens` input (on `model` and `tier`, whose price
        counts): hold that
        and `reserve_output` (or `max_tokens`, if fewer) tokens of reply in every budget the
        agent draws on, until it is settled. The request starts only if that whole hold fits;
        under `strict` alone the reply held shrinks to what is left (its max_tokens follows).
        None while requests in flight hold the room (ask again when they settle);
        BudgetExhausted when even settled use leaves none (nothing is sent). The hold carries a
        warning once past the soft share."""
        scopes = self.scopes(uuid)
        if not scopes:
            return Hold()
        pairs = [(scope, self._spend(scope)) for scope in scopes]
        for scope in scopes:
            refuse_oversized(scope.budget, model, tokens, tier)
        wanted = min(scope.budget.reserve_output for scope in scopes)
        if max_tokens is not None:
            wanted = min(wanted, max_tokens)
        strict = any(scope.budget.strict for scope in scopes)
        warning = None
        for scope, spend in pairs:
            warning = spend.check(scope.budget, new_turn=False) or warning
        prompt = prompt_usage(tokens, self._core.cache)
        rooms = [output_room(spend, scope.budget, model, prompt, tier) for scope, spend in pairs]
        room = min(rooms)
        output = int(min(wanted, room)) if strict else wanted
        if output <= 0 or output > room:
            if any(spend.holds for _, spend in pairs):
                return None  # requests in flight hold the room: their settling may free it
            scope, spend = pairs[rooms.index(room)]
            held = Usage(input_tokens=tokens, output_tokens=max(output, 1))
            raise BudgetExhausted(refusal_text(scope.budget, spend, model, held, tier))
        need_tokens = tokens + output
        need_cost = pricing.cost_usd(model, replace(prompt, output_tokens=output), tier=tier)
        for _, spend in pairs:
            spend.take(need_tokens, need_cost)
            spend.holds += 1
        if warning is not None:
            self._core.event("BudgetWarning", agent=uuid, root=scopes[0].top, text=warning)
        hold = Hold(
            tokens=need_tokens,
            cost_usd=need_cost,
            output=output,
            strict=strict,
            cancel=any(scope.budget.hard_stop == "cancel" for scope in scopes),
            warning=warning,
            tier=tier,
        )
        self._open.setdefault(uuid, []).append(hold)
        return hold

    def extend(self, uuid: str, model: str, hold: Hold, more: int) -> Hold:
        """A reply outgrew its hold: the hold with `more` reply tokens too, if every budget
        has the room; else BudgetExhausted (the reply is to stop). Never waits."""
        scopes = self.scopes(uuid)
        spends = [self._spend(scope) for scope in scopes]
        cost = pricing.reply_cost_usd(model, more, hold.tokens - hold.output, hold.tier)
        for spend, scope in zip(spends, scopes, strict=True):
            tokens_left, cost_left = spend.room(scope.budget)
            if more > tokens_left or cost > cost_left:
                raise BudgetExhausted(exhausted_text(scope.budget, spend, more))
        for spend in spends:
            spend.take(more, cost)
        larger = replace(
            hold,
            tokens=hold.tokens + more,
            cost_usd=hold.cost_usd + cost,
            output=hold.output + more,
        )
        held = self._open.get(uuid, [])
        if hold in held:
            held[held.index(hold)] = larger
        return larger

    def settle(self, uuid: str, hold: Hold, tokens: int, cost_usd: float) -> None:
        """A request ended: what it held goes back, what it used is counted; nothing when
        `release` gave it back already (its host died: it was counted then, at its estimate
        if it had been sent)."""
        held = self._open.get(uuid, [])
        if hold not in held:
            return
        held.remove(hold)
        for scope in self.scopes(uuid):
            self._spend(scope).settle(hold, tokens, cost_usd)

    def release(self, uuid: str, tokens: int = 0, cost_usd: float = 0.0) -> None:
        """The agent's host died: what its requests in flight held goes back (they will never
        settle), and the one it had sent counts as `tokens` and `cost_usd`, its estimate as its
        turn's billing stores it (billing.py): what its hold reserved."""
        for hold in self._open.pop(uuid, []):
            for scope in self.scopes(uuid):
                self._spend(scope).settle(hold, tokens, cost_usd)
            tokens, cost_usd = 0, 0.0

    def before_turn(self, record: AgentRecord, count: bool) -> None:
        """A new turn (`count`: it counts as one) or a fork in a budgeted tree: refused at a
        limit."""
        scopes = self.scopes(record.uuid, record)
        spends = [self._spend(scope) for scope in scopes]
        try:
            for scope, spend in zip(scopes, spends, strict=True):
                spend.check(scope.budget, new_turn=True)
        except BudgetExhausted as exc:
            raise CommandError(str(exc)) from exc
        if count:
            for spend in spends:
                spend.turns += 1


def prompt_usage(tokens: int, cache: CachePolicy | None) -> Usage:
    """The dearest `tokens` of prompt can be: with caching on, all of it written to a cache
    (on Anthropic a write costs more than input: 1.25 times, or twice for an hour)."""
    if cache is None:
        return Usage(input_tokens=tokens)
    hour = tokens if cache.ttl == "1h" else 0
    return Usage(input_tokens=tokens, cache_write_tokens=tokens, cache_write_1h_tokens=hour)


def output_room(
    spend: TreeSpend, budget: Budget, model: str, prompt: Usage, tier: Tier = "standard"
) -> float:
    """The reply tokens a request of `prompt` on `tier` could hold in this budget now."""
    tokens_left, cost_left = spend.room(budget)
    room = tokens_left - prompt.input_tokens
    if budget.cost_usd is not None:
        input_cost = pricing.cost_usd(model, prompt, tier=tier)
        reply_cost = pricing.reply_cost_usd(model, 1_000_000, prompt.input_tokens, tier)
        per_output = reply_cost / 1_000_000
        room = min(room, math.floor((cost_left - input_cost) / per_output))
    return room


def refuse_oversized(budget: Budget, model: str, tokens: int, tier: Tier = "standard") -> None:
    """A request no budget of this size could hold, or a cost budget on a model without a
    price: refused before anything is sent."""
    if budget.tokens is not None and tokens > budget.tokens:
        raise BudgetExhausted(
            f"{BUDGET_EXHAUSTED}tokens: this request needs about {tokens:,}, more than the "
            f"whole budget of {budget.tokens:,}; nothing was sent"
        )
    if budget.cost_usd is None:
        return
    if not pricing.priced(model):
        raise BudgetExhausted(
            f"{BUDGET_EXHAUSTED}cost_usd cannot be kept: {model} has no price in the catalog; "
            "set one in [models.prices] or use a token budget"
        )
    cost = pricing.cost_usd(model, Usage(input_tokens=tokens), tier=tier)
    if cost > budget.cost_usd:
        raise BudgetExhausted(
            f"{BUDGET_EXHAUSTED}cost_usd: this request's input costs about ${cost:,.4g}, more "
            f"than the whole budget of ${budget.cost_usd:,.4g}; nothing was sent"
        )


def refusal_text(
    budget: Budget, spend: TreeSpend, model: str, held: Usage, tier: Tier = "standard"
) -> str:
    """Why a request of `held` input and reply tokens on `tier` cannot start: the limit it
    would pass, or, in a budget nothing was spent from yet, that it holds more than all."""
    tokens, output = held.input_tokens, held.output_tokens
    if spend.tokens or spend.cost_usd:
        return exhausted_text(budget, spend, tokens + output)
    if budget.tokens is not None and tokens + output > budget.tokens:
        return (
            f"{BUDGET_EXHAUSTED}tokens: this request needs about {tokens:,} and holds "
            f"{output:,} for its reply, more than the whole budget of {budget.tokens:,}; "
            f"nothing was sent{SMALLER_HOLD}"
        )
    cost = pricing.cost_usd(model, held, tier=tier)
    return (
        f"{BUDGET_EXHAUSTED}cost_usd: this request and the {output:,} reply tokens it holds "
        f"cost about ${cost:,.4g}, more than the whole budget of ${budget.cost_usd or 0:,.4g}; "
        f"nothing was sent{SMALLER_HOLD}"
    )


def exhausted_text(budget: Budget, spend: TreeSpend, tokens: int) -> str:
    """The limit a hold of `tokens` more would pass, as `Budget exhausted: <what>
    <used>/<limit>`."""
    if budget.tokens is not None and spend.tokens + spend.held_tokens + tokens > budget.tokens:
        return f"{BUDGET_EXHAUSTED}tokens {shown(spend.tokens)}/{shown(budget.tokens)}"
    return f"{BUDGET_EXHAUSTED}cost_usd {shown(spend.cost_usd)}/{shown(budget.cost_usd or 0)}"
