"""The agent tree and its messages as JSON for scripts and the dashboard: each agent's record,
message count, tokens, cost and share of its context window, each tree's totals; from the store.
"""

from __future__ import annotations

import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from providers.catalog import model_info
from providers.errors import GroveError
from supervisor.store import AgentRecord, EventRecord, MessageRecord, Store
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
# Every agent is read again at least this often, so a change no event names shows up too.
FULL_READ_EVERY_S = 10.0
EVENTS_PER_READ = 10_000
# Events whose agents get new messages but keep their record as it was.
MESSAGES_ONLY = frozenset({"TurnStarted", "TurnCompleted", "ToolCalled", "ToolResulted"})
# Payload keys that name an agent.
NAMING_KEYS = ("agent", "recipient", "sender")
# Events that change agents they do not name (a kill ends a subtree, a reviewer comes or goes).
CHANGES_UNNAMED = frozenset({"AgentKilled", "AdvisorToggled", "SupervisorStarted"})


@dataclass(slots=True)
class Spent:
    """What an agent's own messages say, up to its message `last_id`."""

    messages: int = 0
    last_id: int = 0
    totals: UsageTotals = field(default_factory=UsageTotals)
    context_used: int | None = None  # tokens its last request sent and got back

    def read(self, own: list[MessageRecord]) -> None:
        """Count `own`, the agent's messages after `last_id`, in."""
        for message in own:
            if is_billed(message):
                self.totals.add(message)
            if message.kind == "assistant" and "usage" in message.data:
                usage = message.data["usage"]
                self.context_used = sum(int(usage.get(key) or 0) for key in CONTEXT_FIELDS)
        self.messages += len(own)
        self.last_id = own[-1].id if own else self.last_id


class TreeView:
    """The tree's rows, kept between reads for a dashboard that asks often while thousands of
    agents run. Each read follows the event log from where the last one stopped and reads again
    only the agents its events name, and only their new messages; every agent is read again at
    least every `full_read_every_s`. A reader passes the cursor of its last answer and gets only the
    rows changed since. Safe to call from several threads."""

    def __init__(self, full_read_every_s: float = FULL_READ_EVERY_S) -> None:
        self._full_read_every_s = full_read_every_s
        self._lock = threading.Lock()
        self._epoch = secrets.token_hex(4)  # a cursor from another view means "every row"
        self._version = 0
        self._records: dict[str, AgentRecord] = {}
        self._spent: dict[str, Spent] = {}
        self._rows: dict[str, dict[str, Any]] = {}
        self._changed_in: dict[str, int] = {}  # uuid -> the version its row last changed in
        self._trees: dict[str, dict[str, Any]] = {}
        self._after_event = 0
        self._full_read_at: float | None = None

    def rows(self, store: Store, since: str | None = None) -> dict[str, Any]:
        """`{"agents": [row, ...], "trees": {root uuid: totals}, "cursor": ..., "complete":
        ...}`: every row, or with the `cursor` of an earlier answer only the rows changed
        since (`complete` says which). A reviewer counts in the tree of the agent it watches."""
        with self._lock:
            self._catch_up(store)
            known = self._known_version(since)
            return {
                "agents": [
                    row
                    for uuid, row in self._rows.items()
                    if known is None or self._changed_in[uuid] > known
                ],
                "trees": self._trees,
                "cursor": f"{self._epoch}:{self._version}",
                "complete": known is None,
            }

    def _known_version(self, since: str | None) -> int | None:
        epoch, _, version = (since or "").partition(":")
        if epoch != self._epoch or not version.isdigit():
            return None
        return min(int(version), self._version)

    def _catch_up(self, store: Store) -> None:
        """Read what changed since the last read: the agents that events named, or all."""
        now = time.monotonic()
        if self._full_read_at is None or now - self._full_read_at >= self._full_read_every_s:
            self._after_event = store.last_event_id()  # first: what comes after is read next
            self._full_read_at = now
            self._records = {record.uuid: record for record in store.list_agents(True)}
            changed = list(self._records)
        else:
            events = store.events(self._after_event, EVENTS_PER_READ)
            self._after_event = events[-1].id if events else self._after_event
            if len(events) == EVENTS_PER_READ or any(e.kind in CHANGES_UNNAMED for e in events):
                self._full_read_at = None
                return self._catch_up(store)
            changed = self._named(store, events)
        version = self._version + 1
        changed = [uuid for uuid in changed if uuid in self._records]  # not "user", say
        counts = store.message_counts(changed)
        for uuid in changed:
            count, spent = counts[uuid], self._spent.setdefault(uuid, Spent())
            if count != spent.messages:
                spent.read(store.agent_messages(uuid, after_id=spent.last_id))
            row = agent_row(self._records[uuid], spent)
            if row != self._rows.get(uuid):
                self._rows[uuid] = row
                self._changed_in[uuid] = self._version = version
        if self._version == version:
            self._trees = self._tree_totals()

    def _named(self, store: Store, events: list[EventRecord]) -> list[str]:
        """The agents `events` name, with the reviewers watching them and a fork's new
        children; records read again unless the events only added messages."""
        named: dict[str, None] = {}  # in the order events name them
        for event in events:
            for key in NAMING_KEYS:
                uuid = event.payload.get(key)
                if not isinstance(uuid, str):
                    continue
                named[uuid] = None
                if event.kind not in MESSAGES_ONLY or uuid not in self._records:
                    record = store.get_agent(uuid)
                    if record is not None:
                        self._records[uuid] = record
            parent = event.payload.get("parent")
            if event.kind == "AgentsForked" and isinstance(parent, str):
                for child in store.children(parent):
                    if child.uuid not in self._records:
                        self._records[child.uuid] = child
                        named[child.uuid] = None
        watching = [uuid for uuid, record in self._records.items() if record.watched_uuid in named]
        return list(dict.fromkeys([*named, *watching]))

    def _tree_totals(self) -> dict[str, dict[str, Any]]:
        roots = root_of_each(self._records.values())
        trees: dict[str, UsageTotals] = {}
        for uuid, spent in self._spent.items():
            trees.setdefault(roots.get(uuid, uuid), UsageTotals()).merge(spent.totals)
        return {root: totals.as_dict() for root, totals in trees.items()}


def agent_row(record: AgentRecord, spent: Spent) -> dict[str, Any]:
    return {
        **record.model_dump(include=AGENT_FIELDS),
        "messages": spent.messages,
        "tokens": spent.totals.input_tokens + spent.totals.output_tokens,
        "cost_usd": round(spent.totals.cost_usd, 6),
        "context_pct": context_pct(record, spent.context_used),
        "budget": record.metadata.get("budget"),
    }


def tree_rows(store: Store, include_ended: bool = True) -> dict[str, Any]:
    """The tree's rows, read once (see TreeView for a reader that asks again and again)."""
    records = store.list_agents(include_ended=include_ended)
    roots = root_of_each(records)
    trees: dict[str, UsageTotals] = {}
    rows = []
    for record in records:
        spent = Spent()
        spent.read(store.agent_messages(record.uuid))
        trees.setdefault(roots[record.uuid], UsageTotals()).merge(spent.totals)
        rows.append(agent_row(record, spent))
    return {"agents": rows, "trees": {root: t.as_dict() for root, t in trees.items()}}


def context_pct(record: AgentRecord, used: int | None) -> int | None:
    """The share of its model's window the agent's last request filled (None: none yet)."""
    if used is None or record.model is None:
        return None
    try:
        window = model_info(record.model, record.provider).context_window  # type: ignore[arg-type]
    except GroveError:
        return None
    return round(100 * used / window) if window else None


def message_json(message: MessageRecord) -> dict[str, Any]:
    """A stored message for scripts (snapcompact frames left out: they are images)."""
    data = message.model_dump()
    data["data"] = {key: value for key, value in message.data.items() if key != "frames"}
    return data
