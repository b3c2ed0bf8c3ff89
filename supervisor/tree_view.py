"""The agent tree and its messages as JSON for scripts and the dashboard: each agent's record,
message count, tokens, cost and share of its context window, each tree's totals; from the store.
"""

from __future__ import annotations

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


def tree_rows(store: Store, include_ended: bool = True) -> dict[str, Any]:
    """`{"agents": [row, ...], "trees": {root uuid: totals}}`; a reviewer counts in the tree
    of the agent it watches."""
    records = store.list_agents(include_ended=include_ended)
    messages = {record.uuid: store.agent_messages(record.uuid) for record in records}
    roots = root_of_each(records)
    trees: dict[str, UsageTotals] = {}
    rows = []
    for record in records:
        spent = UsageTotals()
        for message in messages[record.uuid]:
            if is_billed(message):
                spent.add(message)
        trees.setdefault(roots[record.uuid], UsageTotals()).merge(spent)
        rows.append(
            {
                **record.model_dump(include=AGENT_FIELDS),
                "messages": len(messages[record.uuid]),
                "tokens": spent.input_tokens + spent.output_tokens,
                "cost_usd": round(spent.cost_usd, 6),
                "context_pct": context_pct(record, messages[record.uuid]),
                "budget": record.metadata.get("budget"),
            }
        )
    return {"agents": rows, "trees": {root: totals.as_dict() for root, totals in trees.items()}}


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
