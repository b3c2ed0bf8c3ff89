"""Usage reports: what each stored request cost (requests, tokens by kind, cost, time), summed
per agent, model, provider, price tier or day, with each tree's total; read from the store alone.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from grove.actors.agent.estimates import ESTIMATED
from grove.providers.base import TIERS, Tier
from grove.providers.pricing import TIER_PRICE_FACTOR
from grove.supervisor.store.base import COMPACTION_KIND, SPENT_KIND, Store
from grove.supervisor.store.records import AgentRecord, MessageRecord

GROUPINGS = ("agent", "model", "provider", "tier", "day")
# Stored messages that record a request's usage: a model's reply, a compaction's summary, a
# reply outside the conversation (a failed turn's, a reviewer's).
BILLED_KINDS = frozenset({"assistant", COMPACTION_KIND, SPENT_KIND})
TOKEN_FIELDS = (
    "input_tokens",
    "output_tokens",
    "thinking_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
)
ESTIMATES = ("estimated_requests", "estimated_input_tokens", "estimated_output_tokens")
MONEY = ("cost_usd", "saved_usd", "tier_saved_usd")


@dataclass(slots=True)
class UsageTotals:
    """Sums of stored requests. `input_tokens` counts whole prompts, the tokens read from a
    cache and written to one included; `saved_usd` is what caching saved against the price
    of every prompt token at the input price (less, where it wrote more than it read);
    `tier_saved_usd` what the flex and batch tiers saved against the standard price."""

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    thinking_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float = 0.0
    saved_usd: float = 0.0
    tier_saved_usd: float = 0.0
    seconds: float = 0.0
    estimated_requests: int = 0
    estimated_input_tokens: int = 0
    estimated_output_tokens: int = 0

    @property
    def cache_hit_share(self) -> float:
        """The share of prompt tokens read from a cache."""
        return self.cache_read_tokens / self.input_tokens if self.input_tokens else 0.0

    def add(self, message: MessageRecord) -> None:
        usage = message.data.get("usage") or {}
        self.requests += 1
        for name in TOKEN_FIELDS:
            setattr(self, name, getattr(self, name) + int(usage.get(name) or 0))
        self.cost_usd += float(message.data.get("cost_usd") or 0.0)
        self.saved_usd += float(message.data.get("saved_usd") or 0.0)
        factor = TIER_PRICE_FACTOR[tier_of_reply(message)]
        self.tier_saved_usd += float(message.data.get("cost_usd") or 0.0) * (1 / factor - 1)
        self.seconds += float(message.data.get("duration_s") or 0.0)
        if message.data.get(ESTIMATED):
            self.estimated_requests += 1
            self.estimated_input_tokens += int(usage.get("input_tokens") or 0)
            self.estimated_output_tokens += int(usage.get("output_tokens") or 0)

    def merge(self, other: UsageTotals) -> None:
        for name in ("requests", *TOKEN_FIELDS, *MONEY, "seconds", *ESTIMATES):
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for name in MONEY:
            data[name] = round(getattr(self, name), 6)
        data["seconds"] = round(self.seconds, 3)
        data["cache_hit_share"] = round(self.cache_hit_share, 4)
        return data


@dataclass(slots=True)
class UsageReport:
    by: str
    rows: dict[str, UsageTotals] = field(default_factory=dict)
    trees: dict[str, UsageTotals] = field(default_factory=dict)  # root uuid -> its tree
    total: UsageTotals = field(default_factory=UsageTotals)

    def as_dict(self) -> dict[str, Any]:
        return {
            "by": self.by,
            "rows": {key: row.as_dict() for key, row in self.rows.items()},
            "trees": {root: tree.as_dict() for root, tree in self.trees.items()},
            "total": self.total.as_dict(),
        }


def is_billed(message: MessageRecord) -> bool:
    """Whether a stored message records a request's usage (a seeded reply records none)."""
    return message.kind in BILLED_KINDS and "usage" in message.data


def billed_messages(store: Store, agent: AgentRecord) -> list[MessageRecord]:
    """The agent's own messages that record a request (inherited ones are its ancestors')."""
    return [m for m in store.agent_messages(agent.uuid) if is_billed(m)]


def tier_of_reply(message: MessageRecord) -> Tier:
    """The price tier a stored reply went on (one stored before tiers: standard)."""
    stored = message.data.get("tier")
    return next((tier for tier in TIERS if tier == stored), "standard")


def group_key(by: str, agent: AgentRecord, message: MessageRecord) -> str:
    if by == "agent":
        return agent.uuid
    provider = str(message.data.get("provider") or agent.provider or "?")
    if by == "provider":
        return provider
    if by == "tier":
        return tier_of_reply(message)
    if by == "model":
        model = str(message.data.get("model") or agent.model or "?")
        return model if "/" in model else f"{provider}/{model}"
    return time.strftime("%Y-%m-%d", time.gmtime(message.created_at))


def usage_report(store: Store, agents: Sequence[AgentRecord], by: str = "agent") -> UsageReport:
    """Every request the agents' stored messages record, grouped `by` agent, model, provider,
    tier or day; each tree's total under its root's uuid."""
    if by not in GROUPINGS:
        raise ValueError(f"group by one of {', '.join(GROUPINGS)}, not {by!r}")
    report = UsageReport(by=by)
    roots = root_of_each(agents)
    for agent in agents:
        tree = report.trees.setdefault(roots[agent.uuid], UsageTotals())
        for message in billed_messages(store, agent):
            report.rows.setdefault(group_key(by, agent, message), UsageTotals()).add(message)
            tree.add(message)
            report.total.add(message)
    return report


def root_of_each(agents: Iterable[AgentRecord]) -> dict[str, str]:
    """Each agent's topmost ancestor among `agents` (itself when its parent is not there); a
    reviewer's parent is the agent it watches."""
    parents = {agent.uuid: agent.parent_uuid or agent.watched_uuid for agent in agents}
    roots: dict[str, str] = {}
    for uuid in parents:
        top, seen = uuid, {uuid}
        while (parent := parents.get(top)) is not None and parent in parents and parent not in seen:
            top = parent
            seen.add(top)
        roots[uuid] = top
    return roots


def subtree(store: Store, root: AgentRecord) -> list[AgentRecord]:
    """`root` and every descendant (children, and the reviewers watching any of them), parents
    before children."""
    return [root, *below(store.list_agents(include_ended=True), [root.uuid])]


def below(agents: Iterable[AgentRecord], tops: Sequence[str]) -> list[AgentRecord]:
    """Every agent among `agents` below `tops`: their children, and the reviewers watching any
    of them, to the bottom; parents before children, an agent met twice followed once."""
    if not tops:
        return []
    under: dict[str, list[AgentRecord]] = {}
    for agent in agents:
        above = agent.parent_uuid or agent.watched_uuid
        if above is not None:
            under.setdefault(above, []).append(agent)
    seen, queue = set(tops), list(tops)
    found: list[AgentRecord] = []
    for uuid in queue:  # grows as it goes: breadth first
        for agent in under.get(uuid, ()):
            if agent.uuid not in seen:
                seen.add(agent.uuid)
                found.append(agent)
                queue.append(agent.uuid)
    return found
