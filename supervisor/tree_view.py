"""The agent tree and its messages as JSON for scripts and the dashboard: each agent's record,
turn state, message count, tokens, cost and share of its context window, each tree's totals.
An agent of a tree no live Grove holds shows `stopped`, and no turn of it streams.
"""

from __future__ import annotations

import functools
import math
import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from grove.providers.catalog import model_info
from grove.providers.errors import GroveError
from grove.supervisor.agent_tiers import tier_of
from grove.supervisor.errors import StoreError
from grove.supervisor.holding import shown_status
from grove.supervisor.open_turns import BATCH_WAITS, Children, OpenTurns, forked
from grove.supervisor.store import AgentRecord, EventRecord, MessageRecord, Store
from grove.supervisor.usage import UsageTotals, below, is_billed, root_of_each

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
CONTEXT_FIELDS = ("input_tokens", "output_tokens")  # input counts cached tokens too
# Every agent is read again at least this often, so a change no event names shows up too.
FULL_READ_EVERY_S = 30.0
# Full reads (also those a flood of events or a change they do not name asks for) are spaced
# so that they take at most this share of the time: a tree of 100,000 agents is not read whole
# every 0.3 s.
FULL_READ_SHARE = 0.05
EVENTS_PER_READ = 10_000
# Events whose agents get new messages but keep their record as it was.
MESSAGES_ONLY = frozenset(
    {"TurnStarted", "TurnCompleted", "ToolCalled", "ToolResulted", *BATCH_WAITS}
)
# Payload keys that name an agent.
NAMING_KEYS = ("agent", "recipient", "sender")
# Events that change agents they do not name (a reviewer comes or goes, a restart).
CHANGES_UNNAMED = frozenset({"AdvisorToggled", "SupervisorStarted"})
# A Grove took a tree (its `agent` is the root): the tree's agents are running again, and a
# turn that began before it is not streaming.
TREE_HELD = "TreeHeld"
ENDED = ("dead", "reaped")  # statuses of agents that are over (`grove agents --all` shows them)


@dataclass(slots=True)
class Spent:
    """What an agent's own messages say, up to its message `last_id`."""

    messages: int = 0
    last_id: int = 0
    totals: UsageTotals = field(default_factory=UsageTotals)
    context_used: int | None = None  # tokens its last request sent and got back

    def read(self, own: list[MessageRecord]) -> UsageTotals:
        """Count `own`, the agent's messages after `last_id`, in; what they billed."""
        billed = UsageTotals()
        for message in own:
            if is_billed(message):
                billed.add(message)
            if message.kind == "assistant" and "usage" in message.data:
                usage = message.data["usage"]
                self.context_used = sum(int(usage.get(key) or 0) for key in CONTEXT_FIELDS)
        self.totals.merge(billed)
        self.messages += len(own)
        self.last_id = own[-1].id if own else self.last_id
        return billed


class Changes:
    """Values by key, each stamped with the version it last changed in, the newest last."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}
        self._changed_in: dict[str, int] = {}

    def put(self, key: str, value: Any, version: int) -> bool:
        """Keep `value` for `key`; whether it differs from the one kept before."""
        if self.values.get(key, self) == value:
            return False
        self.values[key] = value
        self._changed_in.pop(key, None)  # to the end
        self._changed_in[key] = version
        return True

    def since(self, version: int) -> dict[str, Any]:
        """The values changed after `version`."""
        changed = {}
        for key in reversed(self._changed_in):
            if self._changed_in[key] <= version:
                break
            changed[key] = self.values[key]
        return changed


class TreeView:
    """The tree's rows, kept between reads for a dashboard that asks often while thousands of
    agents run. Each read follows the event log from where the last one stopped and reads again
    only the agents its events name, and only their new messages; every agent is read again at
    least every `full_read_every_s`. Which Groves are alive is read every time, which trees they
    hold on full reads and from TreeHeld events. A reader passes the cursor of its last answer
    and gets only the rows and tree totals changed since. Safe to call from several threads."""

    def __init__(
        self, full_read_every_s: float = FULL_READ_EVERY_S, full_read_share: float = FULL_READ_SHARE
    ) -> None:
        self._full_read_every_s = full_read_every_s
        self._full_read_share = full_read_share
        self._lock = threading.Lock()
        self._epoch = secrets.token_hex(4)  # a cursor from another view means "every row"
        self._version = 0
        self._records: dict[str, AgentRecord] = {}
        self._spent: dict[str, Spent] = {}
        self._turns = OpenTurns()
        self._roots: dict[str, str] = {}  # uuid -> the root of its tree
        self._tree_spent: dict[str, UsageTotals] = {}  # root uuid -> its tree's totals
        self._holders: set[str] = set()  # the live Groves
        self._held_by: dict[str, str] = {}  # root uuid -> the Grove holding its tree
        self._held_at: dict[str, int] = {}  # root uuid -> the id of its latest TreeHeld event
        self._rows = Changes()
        self._trees = Changes()
        self._after_event: int | None = None  # None: no read yet
        self._full_read_at = -math.inf
        self._full_read_s = 0.0  # how long the last one took
        self._full_read_wanted = False  # asked for by events, and not yet allowed
        self._unreadable: list[str] = []  # what the last full read could not read, and why

    def rows(self, store: Store, since: str | None = None) -> dict[str, Any]:
        """`{"agents": [row, ...], "trees": {root uuid: totals}, "cursor": ..., "complete":
        ..., "unreadable": [...]}`: every row and tree, or with the `cursor` of an earlier
        answer only those changed since (`complete` says which), and the errors of records
        the last full read skipped. A reviewer counts in the tree of the agent it watches."""
        with self._lock:
            self._catch_up(store)
            known = self._known_version(since)
            rows, trees = (
                (self._rows.values, self._trees.values)
                if known is None
                else (self._rows.since(known), self._trees.since(known))
            )
            return {
                "agents": list(rows.values()),
                "trees": dict(trees),
                "cursor": f"{self._epoch}:{self._version}",
                "complete": known is None,
                "unreadable": list(self._unreadable),
            }

    def _known_version(self, since: str | None) -> int | None:
        epoch, _, version = (since or "").partition(":")
        if epoch != self._epoch or not version.isdigit():
            return None
        return min(int(version), self._version)

    def _catch_up(self, store: Store) -> None:
        """Take in the events since the last read, and read again the agents they named, or
        all of them when a full read is due."""
        children = functools.cache(store.children)
        if self._after_event is None:  # a first read: turns still open in the latest events
            self._after_event = max(0, store.last_event_id() - EVENTS_PER_READ)
        wanted = self._full_read_wanted
        turned: list[str] = []
        taken: set[str] = set()  # roots of trees a Grove took in these events
        while True:
            try:
                events = store.events(self._after_event, EVENTS_PER_READ)
            except StoreError:  # `grove events` names the bad record; the tree is read whole
                wanted = True
                break
            self._after_event = events[-1].id if events else self._after_event
            turned += [uuid for event in events for uuid in self._turns.follow(event, children)]
            taken.update(self._follow_holds(events))
            wanted = wanted or any(event.kind in CHANGES_UNNAMED for event in events)
            if len(events) < EVENTS_PER_READ:
                break
            wanted = True  # a flood: cheaper to read every agent than each it names
        since_full = time.monotonic() - self._full_read_at
        spacing = self._full_read_s / self._full_read_share
        full = since_full >= max(self._full_read_every_s, spacing) or (
            wanted and since_full >= spacing
        )
        self._full_read_wanted = wanted and not full
        holders = store.live_holders()
        if holders != self._holders:  # a Grove came or went: any tree may have changed hands
            self._holders = holders
            taken.update(self._roots.values())
        if full:
            started = self._full_read_at = time.monotonic()
            self._unreadable = []
            listed = store.list_agents(True, unreadable=self._unreadable)
            self._records = {record.uuid: record for record in listed}
            self._held_by = store.tree_holders()
            for uuid, record in self._records.items():
                if record.status != "running":
                    self._turns.open.pop(uuid, None)
            self._roots = root_of_each(self._records.values())
            self._tree_spent = {}
            for uuid, spent in self._spent.items():
                if uuid in self._records:
                    self._tree_spent.setdefault(self._root(uuid), UsageTotals()).merge(spent.totals)
            changed = list(self._records)
        else:
            changed = self._named(store, events, turned, children)
            if taken:
                members = [uuid for uuid in self._records if self._root(uuid) in taken]
                changed = list(dict.fromkeys([*changed, *members]))
        self._read_again(store, changed, all_trees=full)
        if full:
            self._full_read_s = time.monotonic() - started

    def _read_again(self, store: Store, changed: list[str], all_trees: bool) -> None:
        """Read the new messages of the `changed` agents; make their rows and the totals of
        their trees (or of every tree) again."""
        version = self._version + 1
        changed = [uuid for uuid in changed if uuid in self._records]  # not "user", say
        counts = store.message_counts(changed)
        trees = set(self._tree_spent) if all_trees else set()
        for uuid in changed:
            count, spent = counts[uuid], self._spent.setdefault(uuid, Spent())
            if count != spent.messages:
                billed = spent.read(store.agent_messages(uuid, after_id=spent.last_id))
                root = self._root(uuid)
                self._tree_spent.setdefault(root, UsageTotals()).merge(billed)
                trees.add(root)
            row = self._row(uuid, spent)
            if self._rows.put(uuid, row, version):
                self._version = version
        for root in trees:
            if self._trees.put(root, self._tree_spent[root].as_dict(), version):
                self._version = version

    def _follow_holds(self, events: list[EventRecord]) -> list[str]:
        """Take in the trees Groves took in `events`; their roots."""
        taken = []
        for event in events:
            root, holder = event.payload.get("agent"), event.payload.get("holder")
            if event.kind == TREE_HELD and isinstance(root, str) and isinstance(holder, str):
                self._held_by[root] = holder
                self._held_at[root] = event.id
                taken.append(root)
        return taken

    def _row(self, uuid: str, spent: Spent) -> dict[str, Any]:
        """The agent's row: `stopped` and idle when no live Grove holds its tree, streaming
        only in a turn that began after a Grove last took the tree."""
        root = self._root(uuid)
        held = self._held_by.get(root) in self._holders
        began = self._turns.open.get(uuid)
        in_turn = held and began is not None and began > self._held_at.get(root, 0)
        turn = ("batch" if uuid in self._turns.batched else "streaming") if in_turn else "idle"
        return agent_row(self._records[uuid], spent, turn=turn, held=held)

    def _root(self, uuid: str) -> str:
        """The root of `uuid`'s tree: its topmost ancestor known (a reviewer's parent is the
        agent it watches)."""
        chain, top = [], uuid
        while top not in self._roots:
            chain.append(top)
            self._roots[top] = top  # until an ancestor is found; no cycle runs forever
            parent = self._records[top].parent_uuid or self._records[top].watched_uuid
            if parent is None or parent not in self._records:
                break
            top = parent
        self._roots.update(dict.fromkeys(chain, self._roots[top]))
        return self._roots[top]

    def _named(
        self,
        store: Store,
        events: list[EventRecord],
        turned: list[str],
        children: Children,
    ) -> list[str]:
        """The agents `events` name or `turned` (their turn began or ended), with the
        reviewers watching them, a fork's new children and a killed agent's subtree; records
        read again unless the events only added messages."""
        named = dict.fromkeys(turned)
        killed = [event.payload.get("agent") for event in events if event.kind == "AgentKilled"]
        for event in events:
            for key in NAMING_KEYS:
                uuid = event.payload.get(key)
                if not isinstance(uuid, str):
                    continue
                named[uuid] = None
                if event.kind not in MESSAGES_ONLY or uuid not in self._records:
                    self._read_record(store, uuid)
            if event.kind == "AgentsForked":
                for child in forked(event, children):
                    if child.uuid not in self._records:
                        self._records[child.uuid] = child
                        named[child.uuid] = None
        for agent in below(self._records.values(), [top for top in killed if isinstance(top, str)]):
            named[agent.uuid] = None
            self._read_record(store, agent.uuid)
        watching = [uuid for uuid, record in self._records.items() if record.watched_uuid in named]
        return list(dict.fromkeys([*named, *watching]))

    def _read_record(self, store: Store, uuid: str) -> None:
        record = store.get_agent(uuid)
        if record is not None:
            self._records[uuid] = record
            if record.status != "running":
                self._turns.open.pop(uuid, None)  # a killed agent's turn ended with it


def agent_row(record: AgentRecord, spent: Spent, *, turn: str, held: bool) -> dict[str, Any]:
    """`held`: a live Grove holds the agent's tree; else a running agent shows `stopped`.
    `turn`: `streaming`, `batch` (a step waits on a provider batch) or `idle`."""
    return {
        **record.model_dump(include=AGENT_FIELDS),
        "status": shown_status(record.status, held),
        "turn": turn,
        "messages": spent.messages,
        "tokens": spent.totals.input_tokens + spent.totals.output_tokens,
        "cost_usd": round(spent.totals.cost_usd, 6),
        "context_pct": context_pct(record, spent.context_used),
        "budget": record.metadata.get("budget"),
        "tier": tier_of(record),
    }


def tree_rows(store: Store, include_ended: bool = True) -> dict[str, Any]:
    """The tree's rows, read once (TreeView is for a reader that asks again and again)."""
    return listing(TreeView().rows(store), include_ended)


def listing(answer: dict[str, Any], include_ended: bool) -> dict[str, Any]:
    """A complete answer of `TreeView.rows` as `grove agents` lists it: in the order the
    agents were made (ended ones only with `include_ended`), the trees' totals, and the
    errors of records that could not be read."""
    rows = sorted(answer["agents"], key=lambda row: (row["created_at"], row["uuid"]))
    shown = [row for row in rows if include_ended or row["status"] not in ENDED]
    return {"agents": shown, "trees": answer["trees"], "unreadable": answer["unreadable"]}


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
