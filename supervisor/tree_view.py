"""The agent tree and its messages as JSON for scripts and the dashboard: each agent's record,
message count, tokens, cost and share of its context window, each tree's totals; from the store.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from providers.catalog import model_info
from providers.errors import GroveError
from supervisor.store import AgentRecord, MessageRecord, Store
from supervisor.usage import UsageTotals, is_billed, root_of_each

AGENT_FIELDS = {
    "uuid",
    "parent_uuid",
    "watched_uuid",
    "name",
    "role",
    "status",
    "provider",
    "model",
    "thinking_level",
    "created_at",
}
CONTEXT_FIELDS = ("input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens")


@dataclass(frozen=True, slots=True)
class Spent:
    """What an agent's own messages say, as of a message count."""

    messages: int
    totals: UsageTotals
    context_pct: int | None


class TreeView:
    """Rows of the tree, read again only for agents whose message count changed since the
    last read (a dashboard asks often while thousands of agents run)."""

    def __init__(self) -> None:
        self._spent: dict[str, Spent] = {}

    def rows(self, store: Store, include_ended: bool = True) -> dict[str, Any]:
        """`{"agents": [row, ...], "trees": {root uuid: totals}}`; a reviewer counts in the
        tree of the agent it watches."""
        records = store.list_agents(include_ended=include_ended)
        counts = store.message_counts([record.uuid for record in records])
        roots = root_of_each(records)
        trees: dict[str, UsageTotals] = {}
        rows = []
        for record in records:
            spent = self._spent.get(record.uuid)
            if spent is None or spent.messages != counts[record.uuid]:
                spent = self._spent[record.uuid] = read_spent(store, record)
            trees.setdefault(roots[record.uuid], UsageTotals()).merge(spent.totals)
            rows.append(
                {
                    **record.model_dump(include=AGENT_FIELDS),
                    "messages": spent.messages,
                    "tokens": spent.totals.input_tokens + spent.totals.output_tokens,
                    "cost_usd": round(spent.totals.cost_usd, 6),
                    "context_pct": spent.context_pct,
                    "budget": record.metadata.get("budget"),
                }
            )
        return {"agents": rows, "trees": {root: t.as_dict() for root, t in trees.items()}}


def read_spent(store: Store, record: AgentRecord) -> Spent:
    own = store.agent_messages(record.uuid)
    totals = UsageTotals()
    for message in own:
        if is_billed(message):
            totals.add(message)
    return Spent(len(own), totals, context_pct(record, own))


def tree_rows(store: Store, include_ended: bool = True) -> dict[str, Any]:
    """The tree's rows, read once (see TreeView for a reader that asks again and again)."""
    return TreeView().rows(store, include_ended)


def context_pct(record: AgentRecord, own: list[MessageRecord]) -> int | None:
    """The share of its model's window the agent's last request filled (None: none yet)."""
    last = next((m for m in reversed(own) if m.kind == "assistant" and "usage" in m.data), None)
    if last is None or record.model is None:
        return None
    try:
        window = model_info(record.model, record.provider).context_window  # type: ignore[arg-type]
    except GroveError:
        return None
    usage = last.data["usage"]
    used = sum(int(usage.get(key) or 0) for key in CONTEXT_FIELDS)
    return round(100 * used / window) if window else None


def message_json(message: MessageRecord) -> dict[str, Any]:
    """A stored message for scripts (snapcompact frames left out: they are images)."""
    data = message.model_dump()
    data["data"] = {key: value for key, value in message.data.items() if key != "frames"}
    return data
