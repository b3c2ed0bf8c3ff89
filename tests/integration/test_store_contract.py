"""The store contract: one suite, run against SQLite on a temp file and a real redis-server.

Backend-specific checks (wrong Redis password, a file that is not a database, URL forms, the
fork write budget) live in test_store_backends.py.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import queue
import re
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import uuid as uuid_module
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pytest
import redis
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from grove.supervisor.errors import CommandError, StoreError, SupervisorError
from grove.supervisor.store import AgentRecord, MessageRecord, NewMessage, Store, open_store
from grove.supervisor.store.base import DEFAULT_LEASE_TTL_S
from tests.integration.store_child import CHILD_LEASE_TTL_S

REPO_ROOT = Path(__file__).resolve().parents[2]
BACKENDS = ("sqlite", "redis")
HOUR_S = 3600.0  # a timeout no test waits out


@dataclass
class Backend:
    """One store under test: how to open it (also from another process) and how to damage it."""

    name: str
    url: str
    namespace: str = ""
    opened: list[Store] = field(default_factory=list)

    def open(self, **options: Any) -> Store:
        store = open_store(self.url, **options)
        self.opened.append(store)
        return store

    def raw_execute(self, sql: str, *params: Any) -> None:
        """Write straight into the SQLite file, bypassing the store."""
        connection = sqlite3.connect(self.url.removeprefix("sqlite:///"))
        with connection:
            connection.execute(sql, params)
        connection.close()

    def raw_redis(self) -> redis.Redis:
        return redis.Redis.from_url(self.url.partition("?")[0])


def _redis_url_for_test(request: pytest.FixtureRequest) -> tuple[str, str]:
    base = request.getfixturevalue("redis_url")
    namespace = f"test-{uuid_module.uuid4().hex[:12]}"
    return f"{base}?namespace={namespace}", namespace


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "sqlite":
        chosen = Backend(name="sqlite", url=f"sqlite:///{tmp_path / 'grove.sqlite3'}")
    else:
        url, namespace = _redis_url_for_test(request)
        chosen = Backend(name="redis", url=url, namespace=namespace)
    yield chosen
    for store in chosen.opened:
        store.close()


@pytest.fixture
def store(backend: Backend) -> Store:
    return backend.open()


def new_agent(
    parent: AgentRecord | None = None,
    *,
    fork_message_id: int = 0,
    uuid: str | None = None,
    **fields: Any,
) -> AgentRecord:
    return AgentRecord(
        uuid=uuid or str(uuid_module.uuid4()),
        role="root" if parent is None else "child",
        parent_uuid=None if parent is None else parent.uuid,
        fork_message_id=fork_message_id,
        provider="anthropic",
        model="claude-sonnet-4-5",
        thinking_level="med",
        created_at=time.time(),
        **fields,
    )


def fork(store: Store, parent: AgentRecord) -> AgentRecord:
    """A child forked now, the way the supervisor does it: at the last message id."""
    child = new_agent(parent, fork_message_id=store.last_message_id())
    store.create_agents([child])
    return child


def exchange(store: Store, agent: AgentRecord, number: int) -> list[MessageRecord]:
    return [
        store.append_message(agent.uuid, "user", f"{agent.uuid[:4]} question {number}"),
        store.append_message(
            agent.uuid,
            "assistant",
            f"{agent.uuid[:4]} answer {number}",
            data={"thinking": [{"text": "hmm", "signature": "c2ln"}], "usage": {"input": 3}},
        ),
    ]


def contents(messages: list[MessageRecord]) -> list[str]:
    return [message.content for message in messages]


# ----- message ids and agent_messages --------------------------------------------------------


def test_ids_are_global_and_strictly_increasing_across_agents_and_connections(
    backend: Backend, store: Store
) -> None:
    other_connection = backend.open()
    root = new_agent()
    store.create_agents([root])
    children = [fork(store, root) for _ in range(2)]
    agents = [root, *children]
    assert store.last_message_id() == 0
    written = []
    for step in range(30):
        writer = store if step % 2 == 0 else other_connection
        written.append(writer.append_message(agents[step % 3].uuid, "user", f"m{step}"))
    ids = [message.id for message in written]
    assert all(earlier < later for earlier, later in itertools.pairwise(ids))
    assert store.last_message_id() == ids[-1] == other_connection.last_message_id()
    for index, agent in enumerate(agents):
        mine = store.agent_messages(agent.uuid)
        assert mine == [message for step, message in enumerate(written) if step % 3 == index]
    first, *_, last = store.agent_messages(root.uuid)
    middle = store.agent_messages(root.uuid, after_id=first.id, up_to_id=last.id - 1)
    assert contents(middle) == [f"m{step}" for step in range(3, 27, 3)]


def test_a_stored_message_reads_back_exactly_as_returned(store: Store) -> None:
    root = new_agent(name="main", metadata={"workspace": "/srv/x", "tags": ["a", "b"]})
    store.create_agents([root])
    data = {"thinking": "ünïcödé \u2028 text", "usage": {"input": 12, "cost": 0.25}, "raw": None}
    written = store.append_message(root.uuid, "assistant", "answer\n\twith\x00nul", data=data)
    assert store.agent_messages(root.uuid) == [written]
    assert written.data == data and written.kind == "assistant" and written.ticket is None
    assert store.get_agent(root.uuid) == root


# ----- fork assembly -------------------------------------------------------------------------


def test_child_sees_exactly_the_parent_prefix_up_to_the_fork(store: Store) -> None:
    root = new_agent()
    store.create_agents([root])
    before_fork = [message for number in range(3) for message in exchange(store, root, number)]
    child = fork(store, root)
    after_fork = exchange(store, root, 3)
    own = exchange(store, child, 0)
    conversation = store.conversation(child.uuid)
    assert conversation == before_fork + own
    leaked = {message.id for message in after_fork} & {message.id for message in conversation}
    assert not leaked
    assert store.conversation(root.uuid) == before_fork + after_fork


def test_grandchild_sees_both_prefixes_and_nothing_later(store: Store) -> None:
    root = new_agent()
    store.create_agents([root])
    root_prefix = exchange(store, root, 0)
    child = fork(store, root)
    exchange(store, root, 1)  # after the child's fork: never visible below it
    child_prefix = exchange(store, child, 0)
    grandchild = fork(store, child)
    exchange(store, child, 1)
    exchange(store, root, 2)
    own = exchange(store, grandchild, 0)
    assert store.conversation(grandchild.uuid) == root_prefix + child_prefix + own
    assert store.children(root.uuid) == [child]
    assert store.children(child.uuid) == [grandchild]


def test_children_created_since_a_time_are_the_newest(store: Store) -> None:
    root = new_agent()
    early = [new_agent(root).model_copy(update={"created_at": 100.0 + n}) for n in range(3)]
    forked = [new_agent(root).model_copy(update={"created_at": 200.0}) for _ in range(2)]
    store.create_agents([root, *early, *forked])
    assert store.children(root.uuid, created_since=200.0) == sorted(
        forked, key=lambda child: child.uuid
    )
    assert store.children(root.uuid, created_since=101.0) == [
        *early[1:],
        *store.children(root.uuid, created_since=200.0),
    ]
    assert store.children(root.uuid, created_since=300.0) == []
    assert len(store.children(root.uuid)) == 5


def test_message_counts_are_each_agents_own_messages(store: Store) -> None:
    root = new_agent()
    store.create_agents([root])
    exchange(store, root, 0)
    child, quiet = fork(store, root), fork(store, root)
    exchange(store, child, 0)
    store.append_message(child.uuid, "user", "one more")
    counts = store.message_counts([root.uuid, child.uuid, quiet.uuid, "never-stored"])
    assert counts == {root.uuid: 2, child.uuid: 3, quiet.uuid: 0, "never-stored": 0}
    assert counts[child.uuid] == len(store.agent_messages(child.uuid))
    assert store.message_counts([]) == {}
    many = [f"absent-{number}" for number in range(1200)] + [child.uuid]  # past any chunk size
    assert store.message_counts(many) == {**dict.fromkeys(many[:-1], 0), child.uuid: 3}


def test_newest_messages_are_an_agents_own_last_ones_oldest_first(store: Store) -> None:
    root = new_agent()
    store.create_agents([root])
    inherited = exchange(store, root, 0)
    child = fork(store, root)
    own = exchange(store, child, 0) + exchange(store, child, 1)
    exchange(store, root, 1)  # the parent's later messages are not the child's
    assert store.newest_messages(child.uuid, 3) == own[-3:]
    assert store.newest_messages(child.uuid, 1) == own[-1:]
    assert store.newest_messages(child.uuid, 10) == own
    assert store.newest_messages(child.uuid, 0) == []
    assert store.newest_messages(root.uuid, 2)[0] != inherited[0]
    assert store.newest_messages("never-stored", 5) == []


def test_agents_are_read_together_by_whole_uuid(store: Store) -> None:
    root = new_agent()
    store.create_agents([root])
    child = fork(store, root)
    store.update_agent(child.uuid, status="dead")
    found = store.get_agents([root.uuid, child.uuid, "never-stored", root.uuid[:8]])
    assert found == {root.uuid: store.get_agent(root.uuid), child.uuid: store.get_agent(child.uuid)}
    assert found[child.uuid].status == "dead"  # ended agents too, as get_agent reads them
    assert store.get_agents([]) == {}
    many = [f"absent-{number}" for number in range(1200)] + [child.uuid]  # past any chunk size
    assert list(store.get_agents(many)) == [child.uuid]


def test_fork_message_id_zero_inherits_nothing(store: Store) -> None:
    root = new_agent()
    store.create_agents([root])
    exchange(store, root, 0)
    fresh = new_agent(root, fork_message_id=0)
    store.create_agents([fresh])
    own = exchange(store, fresh, 0)
    assert store.conversation(fresh.uuid) == own


def test_clear_stops_assembly_wherever_it_is(store: Store) -> None:
    root = new_agent()
    store.create_agents([root])
    exchange(store, root, 0)
    store.append_message(root.uuid, "clear", "")
    kept = exchange(store, root, 1)
    assert store.conversation(root.uuid) == kept
    child = fork(store, root)
    store.append_message(root.uuid, "clear", "")  # after the fork point: the child never sees it
    own = exchange(store, child, 0)
    assert store.conversation(child.uuid) == kept + own
    assert store.conversation(root.uuid) == []
    store.append_message(child.uuid, "clear", "")
    after = exchange(store, child, 1)
    assert store.conversation(child.uuid) == after
    grandchild = fork(store, child)
    assert store.conversation(grandchild.uuid) == after


def compacted(store: Store, agent: AgentRecord, first_kept: int) -> MessageRecord:
    return store.append_message(
        agent.uuid,
        "compaction",
        f"summary up to {first_kept}",
        data={"first_kept_message_id": first_kept, "tokens_before": 900, "tokens_after": 90},
    )


def test_a_compaction_shows_its_summary_the_kept_messages_and_what_follows(store: Store) -> None:
    root = new_agent()
    store.create_agents([root])
    exchange(store, root, 0)
    kept = exchange(store, root, 1)
    summary = compacted(store, root, kept[0].id)
    after = exchange(store, root, 2)
    assert store.conversation(root.uuid) == [summary, *kept, *after]
    assert len(store.agent_messages(root.uuid)) == 7  # the full history stays in the store
    # A second compaction replaces the first; the first is never shown again.
    second = compacted(store, root, after[0].id)
    assert store.conversation(root.uuid) == [second, *after]
    # Keeping nothing: the view starts after the compaction.
    third = compacted(store, root, 0)
    assert store.conversation(root.uuid) == [third]
    store.append_message(root.uuid, "clear", "")
    assert store.conversation(root.uuid) == []


def test_forks_after_a_compaction_see_the_compacted_view(store: Store) -> None:
    root = new_agent()
    store.create_agents([root])
    exchange(store, root, 0)
    kept = exchange(store, root, 1)
    summary = compacted(store, root, kept[0].id)
    child = fork(store, root)
    own = exchange(store, child, 0)
    assert store.conversation(child.uuid) == [summary, *kept, *own]
    grandchild = fork(store, child)
    more = exchange(store, grandchild, 0)
    assert store.conversation(grandchild.uuid) == [summary, *kept, *own, *more]
    # The child compacts, keeping messages that lie in its parent's part of the history.
    child_summary = compacted(store, child, kept[1].id)
    assert store.conversation(child.uuid) == [child_summary, kept[1], *own]
    # A compaction after the fork point is not the grandchild's.
    assert store.conversation(grandchild.uuid) == [summary, *kept, *own, *more]


def test_conversation_of_an_unknown_agent_is_a_store_error(store: Store) -> None:
    with pytest.raises(StoreError, match="Unknown agent nobody"):
        store.conversation("nobody")


# ----- tickets -------------------------------------------------------------------------------


def test_a_ticket_is_stored_once(backend: Backend, store: Store) -> None:
    root, other = new_agent(), new_agent()
    store.create_agents([root, other])
    first = store.append_message(root.uuid, "assistant", "done", data={"n": 1}, ticket="turn-1")
    assert store.append_message(root.uuid, "assistant", "again", ticket="turn-1") == first
    reopened = backend.open()
    assert reopened.append_message(root.uuid, "assistant", "third", ticket="turn-1") == first
    batch = reopened.append_messages(
        [
            NewMessage(agent_uuid=root.uuid, kind="user", content="x", ticket="turn-2"),
            NewMessage(agent_uuid=root.uuid, kind="user", content="y", ticket="turn-2"),
            NewMessage(agent_uuid=root.uuid, kind="user", content="z", ticket="turn-1"),
        ]
    )
    assert batch[0] == batch[1] and batch[0].content == "x" and batch[2] == first
    assert contents(store.agent_messages(root.uuid)) == ["done", "x"]
    assert store.last_message_id() == batch[0].id
    with pytest.raises(StoreError, match=f"Ticket turn-1 already belongs to .*{root.uuid}"):
        store.append_message(other.uuid, "assistant", "stolen", ticket="turn-1")
    assert store.agent_messages(other.uuid) == []
    assert store.last_message_id() == batch[0].id


# ----- writes are whole or nothing -----------------------------------------------------------


def test_a_batch_with_one_invalid_record_writes_nothing(store: Store) -> None:
    root = new_agent()
    store.create_agents([root])
    exchange(store, root, 0)
    good = new_agent(root, fork_message_id=1)
    orphan = AgentRecord(uuid="orphan", parent_uuid="nobody", role="child", created_at=1.0)
    hostile = AgentRecord.model_construct(**{**good.model_dump(), "uuid": "x1", "status": "zombie"})
    future = new_agent(root, fork_message_id=99)
    cases = [
        ([good, orphan], "Unknown agent nobody"),
        ([good, hostile], "Invalid agent record: status: Input should be"),
        ([good, good], f"Agent {good.uuid} appears twice"),
        ([good, root], f"Agent {root.uuid} already exists"),
        ([good, future], "forks at message 99, after the last message 2"),
    ]
    for batch, reason in cases:
        with pytest.raises(StoreError, match=reason):
            store.create_agents(batch)
        assert store.get_agent(good.uuid) is None
        assert store.children(root.uuid) == []
    too_big = NewMessage(agent_uuid=good.uuid, kind="user", content="x" * (5 * 1024 * 1024))
    with pytest.raises(StoreError, match="exceeds the store's limit"):
        store.create_agents([good], [too_big])
    assert store.get_agent(good.uuid) is None
    assert store.last_message_id() == 2


def test_create_agents_writes_children_and_first_messages_together(store: Store) -> None:
    root = new_agent()
    store.create_agents([root])
    exchange(store, root, 0)
    children = [new_agent(root, fork_message_id=2) for _ in range(5)]
    grandchild = new_agent(children[0], fork_message_id=2)
    prompts = [
        NewMessage(agent_uuid=c.uuid, kind="user", content=f"task {i}")
        for i, c in enumerate(children)
    ]
    written = store.create_agents([*children, grandchild], prompts)
    assert [message.content for message in written] == [f"task {i}" for i in range(5)]
    assert store.children(root.uuid) == children
    assert store.children(children[0].uuid) == [grandchild]
    assert contents(store.conversation(children[3].uuid))[-1] == "task 3"
    assert len(store.conversation(children[3].uuid)) == 3


def test_append_messages_batch_is_atomic(store: Store) -> None:
    root = new_agent()
    store.create_agents([root])
    good = NewMessage(agent_uuid=root.uuid, kind="user", content="fine")
    with pytest.raises(StoreError, match="Unknown agent ghost"):
        store.append_messages([good, NewMessage(agent_uuid="ghost", kind="user", content="?")])
    with pytest.raises(StoreError, match="not plain JSON"):
        store.append_messages([good, good.model_copy(update={"data": {"bad": {1, 2}}})])
    with pytest.raises(StoreError, match="Invalid message: kind"):
        store.append_message(root.uuid, "Not A Kind", "x")
    assert store.agent_messages(root.uuid) == []
    assert store.last_message_id() == 0


def test_oversized_message_is_refused_and_nothing_is_written(backend: Backend) -> None:
    small = backend.open(max_message_bytes=1024)
    root = new_agent()
    small.create_agents([root])
    at_limit = small.append_message(root.uuid, "user", "é" * 511)  # 1022 bytes + "{}"
    assert at_limit.id == 1
    with pytest.raises(
        StoreError, match="Message of 1,025 bytes exceeds the store's limit of 1,024"
    ):
        small.append_message(root.uuid, "user", "x" * 1023)
    with pytest.raises(StoreError, match="exceeds the store's limit"):
        small.append_message(root.uuid, "assistant", "", data={"blob": "y" * 2000})
    assert small.agent_messages(root.uuid) == [at_limit]
    default = backend.open()
    with pytest.raises(StoreError, match="limit of 4,194,304 bytes"):
        default.append_message(root.uuid, "user", "z" * (4 * 1024 * 1024 + 1))
    assert default.last_message_id() == 1


# ----- agents --------------------------------------------------------------------------------


def test_resolve_agent_prefix_rules(store: Store) -> None:
    root = new_agent(uuid="abc11111")
    twin = new_agent(uuid="abc22222")
    lone = new_agent(uuid="abd33333")
    dead = new_agent(uuid="fff44444", status="dead", ended_at=time.time())
    alive = new_agent(uuid="fff55555")
    store.create_agents([root, twin, lone, dead, alive])
    assert store.resolve_agent("abd") == lone
    assert store.resolve_agent("abc1") == root
    assert store.resolve_agent("  abc22222 ") == twin
    with pytest.raises(CommandError) as ambiguous:
        store.resolve_agent("abc")
    assert (
        str(ambiguous.value) == "Ambiguous agent prefix: abc matches 2 agents: abc11111, abc22222"
    )
    with pytest.raises(CommandError) as unknown:
        store.resolve_agent("abx")
    assert ambiguous.value.text != unknown.value.text == "Unknown agent: abx"
    with pytest.raises(CommandError, match="Agent id is empty"):
        store.resolve_agent("   ")
    with pytest.raises(CommandError, match="Ambiguous agent prefix: fff matches 2 agents"):
        store.resolve_agent("fff")
    assert store.resolve_agent("fff", include_ended=False) == alive
    with pytest.raises(CommandError, match="Unknown agent: fff4"):
        store.resolve_agent("fff4", include_ended=False)
    many = [new_agent(uuid=f"cafe{number:04d}") for number in range(12)]
    store.create_agents(many)
    with pytest.raises(CommandError, match="cafe matches more than 10 agents: cafe0000, "):
        store.resolve_agent("cafe")


def test_list_update_and_focus(store: Store) -> None:
    root = new_agent()
    store.create_agents([root])
    children = [fork(store, root) for _ in range(3)]
    assert store.list_agents() == [root, *children]
    ended = store.update_agent(children[1].uuid, status="dead", ended_at=123.0)
    assert ended == children[1].model_copy(update={"status": "dead", "ended_at": 123.0})
    assert store.get_agent(children[1].uuid) == ended
    assert store.list_agents() == [root, children[0], children[2]]
    assert store.list_agents(include_ended=True) == [root, children[0], ended, children[2]]
    switched = store.update_agent(root.uuid, model="gpt-5", provider="openai", thinking_level=None)
    assert store.get_agent(root.uuid) == switched and switched.thinking_level is None
    refusals: list[tuple[dict[str, Any], str]] = [
        ({"parent_uuid": None}, "parent_uuid cannot change"),
        ({"status": "sleeping"}, "Invalid update of agent .*status: Input should be"),
        ({"colour": "red"}, "no field colour"),
        ({"metadata": {"x": {1}}}, "Metadata of agent .* is not plain JSON"),
        ({"watched_uuid": "ghost"}, "Unknown agent ghost to watch"),
    ]
    for changes, reason in refusals:
        with pytest.raises(StoreError, match=reason):
            store.update_agent(root.uuid, **changes)
        assert store.get_agent(root.uuid) == switched
    with pytest.raises(StoreError, match="Unknown agent ghost"):
        store.update_agent("ghost", status="dead")
    assert store.get_focus(root.uuid) is None
    store.set_focus(root.uuid, children[2].uuid)
    store.set_focus(root.uuid, children[0].uuid)
    assert store.get_focus(root.uuid) == children[0].uuid
    with pytest.raises(StoreError, match="Cannot focus: unknown agent ghost"):
        store.set_focus(root.uuid, "ghost")
    assert store.get_focus(root.uuid) == children[0].uuid


# ----- events --------------------------------------------------------------------------------


def test_events_keep_their_order(backend: Backend, store: Store) -> None:
    assert store.last_event_id() == 0
    written = [store.append_event("CommandDispatched", {"n": number}) for number in range(7)]
    assert [event.id for event in written] == sorted({event.id for event in written})
    assert store.events() == written
    assert backend.open().events(after_id=written[2].id, limit=3) == written[3:6]
    assert store.events(after_id=written[-1].id) == []
    assert backend.open().last_event_id() == written[-1].id
    with pytest.raises(StoreError, match="Invalid event kind"):
        store.append_event("", {})
    with pytest.raises(StoreError, match="not plain JSON"):
        store.append_event("AgentKilled", {"when": float("nan")})
    assert store.events() == written


def test_trimming_deletes_the_older_events_and_keeps_the_ids(store: Store) -> None:
    written = []
    for number in range(5):
        written.append(store.append_event("CommandDispatched", {"n": number}))
        time.sleep(0.01)  # each made at a time of its own
    assert store.trim_events(before=written[2].created_at) == 2
    assert store.events() == written[2:]
    assert store.trim_events(before=written[2].created_at) == 0  # nothing older is left
    newer = store.append_event("CommandDispatched", {"n": 5})
    assert newer.id == written[-1].id + 1
    assert store.trim_events(before=newer.created_at + 1) == 4
    assert store.events() == []
    assert store.last_event_id() == newer.id  # trimmed, still the newest ever made


def test_a_batch_of_events_is_written_in_order_or_not_at_all(
    backend: Backend, store: Store
) -> None:
    before = store.append_event("AgentCreated", {"agent": "root"})
    batch = store.append_events(
        [("CommandDispatched", {"n": 1}), ("AgentForked", {"n": 2}), ("CommandResulted", {})]
    )
    assert [event.id for event in batch] == [before.id + 1, before.id + 2, before.id + 3]
    assert backend.open().events(after_id=before.id) == batch
    assert [event.payload for event in batch] == [{"n": 1}, {"n": 2}, {}]
    with pytest.raises(StoreError, match="not plain JSON"):
        store.append_events([("AgentKilled", {"n": 3}), ("AgentKilled", {"when": float("nan")})])
    assert store.append_events([]) == []
    assert store.events(after_id=batch[-1].id) == []


def test_a_batch_larger_than_one_insert_keeps_its_order_and_ids(
    backend: Backend, store: Store
) -> None:
    """A batch of more events than one SQLite statement writes (300): its ids run on in
    order across the statements, as a small batch's do."""
    before = store.append_event("AgentCreated", {"agent": "root"})
    batch = store.append_events([("CommandDispatched", {"n": n}) for n in range(701)])
    assert [event.id for event in batch] == list(range(before.id + 1, before.id + 702))
    assert [event.payload["n"] for event in backend.open().events(before.id)] == list(range(701))


def test_logged_events_are_written_as_appended_ones_are_in_order_or_not_at_all(
    backend: Backend, store: Store
) -> None:
    """`log_events` (the event log's write, which reads nothing back) writes what
    `append_events` would: the next ids in order, the payloads as given."""
    before = store.append_event("AgentCreated", {"agent": "root"})
    store.log_events([("CommandDispatched", {"n": 1}), ("AgentForked", {"n": 2})])
    logged = backend.open().events(after_id=before.id)
    assert [(event.id, event.kind, event.payload) for event in logged] == [
        (before.id + 1, "CommandDispatched", {"n": 1}),
        (before.id + 2, "AgentForked", {"n": 2}),
    ]
    with pytest.raises(StoreError, match="not plain JSON"):
        store.log_events([("AgentKilled", {"n": 3}), ("AgentKilled", {"when": float("nan")})])
    store.log_events([])
    assert store.events(after_id=logged[-1].id) == []
    after = store.append_event("CommandResulted", {})
    assert after.id == before.id + 3


def test_wait_events_blocks_until_an_event_or_the_timeout(backend: Backend, store: Store) -> None:
    """Nothing new: it waits its whole timeout. An event written meanwhile through another
    connection to the store ends the wait, long before an hour's timeout would."""
    first = store.append_event("AgentForked", {"child": "a"})
    assert store.wait_events(0, timeout_s=5.0) == [first]
    started = time.monotonic()
    assert store.wait_events(first.id, timeout_s=0.3) == []
    assert time.monotonic() - started >= 0.25
    writer = backend.open()
    timer = threading.Timer(0.3, writer.append_event, args=("ModelSwitched", {"model": "gpt-5"}))
    started = time.monotonic()
    timer.start()
    try:
        woken = store.wait_events(first.id, timeout_s=HOUR_S)
    finally:
        timer.join()
    assert [event.kind for event in woken] == ["ModelSwitched"]
    assert time.monotonic() - started < HOUR_S / 60  # woken by the event, not the timeout


# ----- holders: the live Groves and the trees they hold ----------------------------------------


def test_a_live_holder_holds_its_trees_until_another_takes_one_or_it_drops(
    backend: Backend, store: Store
) -> None:
    other = backend.open()  # another process's view of the same store
    for holder in ("grove-a", "grove-b"):
        assert not store.renew_holder(holder, ttl_s=30.0)  # new
    assert other.renew_holder("grove-a", ttl_s=30.0)  # alive until now
    store.hold_trees("grove-a", ["root-1", "root-2"])
    store.hold_trees("grove-b", [])  # holds nothing: no write
    assert other.live_holders() == {"grove-a", "grove-b"}
    assert other.tree_holders() == {"root-1": "grove-a", "root-2": "grove-a"}
    other.hold_trees("grove-b", ["root-2", "root-3"])  # root-2 is taken over
    store.drop_holder("grove-a")
    assert store.live_holders() == {"grove-b"}
    assert store.tree_holders() == {"root-2": "grove-b", "root-3": "grove-b"}
    store.drop_holder("grove-b")
    store.drop_holder("grove-b")  # twice is no error
    assert (store.live_holders(), store.tree_holders()) == (set(), {})


def test_a_holder_not_renewed_in_time_holds_nothing(backend: Backend, store: Store) -> None:
    store.renew_holder("short", ttl_s=0.3)
    store.renew_holder("long", ttl_s=30.0)
    store.hold_trees("short", ["root-1"])
    store.hold_trees("long", ["root-2"])
    assert store.tree_holders() == {"root-1": "short", "root-2": "long"}
    time.sleep(0.5)
    assert backend.open().live_holders() == {"long"}
    assert store.tree_holders() == {"root-2": "long"}
    assert not store.renew_holder("short", ttl_s=30.0)  # back, but what it held went with it
    assert store.tree_holders() == {"root-2": "long"}


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda store: store.renew_holder("a b", ttl_s=5.0), "Invalid holder id: "),
        (lambda store: store.renew_holder("a", ttl_s=0.0), "time to live must be positive"),
        (lambda store: store.renew_holder("a", ttl_s=math.nan), "time to live must be positive"),
        (lambda store: store.hold_trees("a", ["x:y"]), "Invalid root id: "),
        (lambda store: store.drop_holder(""), "Invalid holder id: "),
    ],
)
def test_bad_holder_input_is_refused_and_changes_nothing(
    store: Store, call: Any, message: str
) -> None:
    with pytest.raises(StoreError, match=re.escape(message)):
        call(store)
    assert (store.live_holders(), store.tree_holders()) == (set(), {})


# ----- leases --------------------------------------------------------------------------------


async def test_leases_are_strictly_fifo_for_twenty_waiters(backend: Backend) -> None:
    stores = [backend.open(), backend.open()]
    order: list[int] = []
    inside = 0
    most_inside = 0

    async def worker(number: int) -> None:
        nonlocal inside, most_inside
        async with stores[number % 2].lease("session-a", timeout_s=30.0):
            inside += 1
            most_inside = max(most_inside, inside)
            order.append(number)
            await asyncio.sleep(0.002)
            inside -= 1

    async with stores[0].lease("session-a", timeout_s=5.0):
        tasks = [asyncio.create_task(worker(number)) for number in range(20)]
        await asyncio.sleep(0.2)
        assert order == []  # all twenty queued behind the holder
    await asyncio.wait_for(asyncio.gather(*tasks), timeout=30.0)
    assert order == list(range(20))
    assert most_inside == 1


async def test_a_held_lease_does_not_block_other_sessions(store: Store) -> None:
    """Session b's lease is taken while a's is held; were b queued behind a, whose holder
    waits on it, its wait could only end in its timeout's error."""
    async with (
        store.lease("session-a", timeout_s=5.0),
        store.lease("session-b", timeout_s=10.0) as lease,
    ):
        assert lease.session_id == "session-b"


async def test_a_timed_out_waiter_leaves_the_queue(backend: Backend, store: Store) -> None:
    release = asyncio.Event()
    acquired: list[str] = []
    impatient_store, patient_store = backend.open(), backend.open()

    async def holder() -> None:
        async with store.lease("s", timeout_s=5.0):
            acquired.append("holder")
            await release.wait()

    async def impatient() -> None:
        async with impatient_store.lease("s", timeout_s=0.2):
            acquired.append("impatient")

    async def patient() -> None:
        # shorter than a ticket's time to live: a dropped ticket left in the queue would hold
        # it up until this wait timed out
        async with patient_store.lease("s", timeout_s=DEFAULT_LEASE_TTL_S / 2):
            acquired.append("patient")

    holding = asyncio.create_task(holder())
    await asyncio.sleep(0.05)
    giving_up = asyncio.create_task(impatient())
    waiting = asyncio.create_task(patient())  # queued behind the impatient one
    with pytest.raises(
        SupervisorError, match=r"Timed out after 0\.2 s waiting for the lease on session s"
    ):
        await giving_up
    release.set()
    await holding
    await waiting  # the dropped ticket did not hold the queue up: no timeout
    assert acquired == ["holder", "patient"]


@dataclass
class Child:
    """tests.integration.store_child in its own process; its stdout lines arrive on a queue."""

    process: subprocess.Popen[str]
    errors: IO[str]
    lines: queue.Queue[str] = field(default_factory=queue.Queue)
    pump: threading.Thread = field(init=False)

    def __post_init__(self) -> None:
        self.pump = threading.Thread(target=self._pump, daemon=True)

    @classmethod
    def start(cls, *arguments: str) -> Child:
        errors = tempfile.TemporaryFile("w+")  # noqa: SIM115 (closed by kill())
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.integration.store_child", *arguments],
            cwd=REPO_ROOT,
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
        )
        child = cls(process=process, errors=errors)
        child.pump.start()
        return child

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.strip())

    def next_line(self, timeout_s: float) -> str:
        try:
            return self.lines.get(timeout=timeout_s)
        except queue.Empty:
            self.kill()
            self.errors.seek(0)
            pytest.fail(f"the child printed nothing in {timeout_s} s: {self.errors.read()[-2000:]}")

    def kill(self) -> None:
        """SIGKILL: no cleanup code runs in the child."""
        self.process.kill()
        self.process.wait(timeout=10)
        self.pump.join(timeout=10)  # ends at the pipe's EOF
        assert self.process.stdout is not None
        self.process.stdout.close()
        self.errors.close()


async def test_a_dead_lease_holder_in_another_process_is_skipped(
    backend: Backend, store: Store
) -> None:
    child = Child.start("hold-lease", backend.url, "shared-session")
    try:
        assert child.next_line(timeout_s=30.0) == "held"
        # Alive, it keeps renewing its short TTL, so waiting longer than the TTL is not enough.
        with pytest.raises(SupervisorError, match="Timed out"):
            async with store.lease("shared-session", timeout_s=3 * CHILD_LEASE_TTL_S):
                pytest.fail("got a lease another process holds")
    finally:
        child.kill()
    started = time.monotonic()
    async with store.lease("shared-session", timeout_s=10.0):
        waited = time.monotonic() - started
    assert waited < CHILD_LEASE_TTL_S + 1.0


# ----- untrusted records ---------------------------------------------------------------------


def _corrupt(backend: Backend, agent: AgentRecord) -> None:
    """Damage one agent, its messages and the event log behind the store's back."""
    if backend.name == "sqlite":
        backend.raw_execute("UPDATE agents SET role = 'emperor' WHERE uuid = ?", agent.uuid)
        backend.raw_execute(
            "UPDATE messages SET data = '{not json' WHERE agent_uuid = ?", agent.uuid
        )
        backend.raw_execute("INSERT INTO events (kind, payload, created_at) VALUES ('X', '[1]', 0)")
    else:
        client = backend.raw_redis()
        prefix = backend.namespace
        client.set(f"{prefix}:agent:{agent.uuid}", b'{"uuid": "' + agent.uuid.encode() + b'", "x"')
        client.zadd(f"{prefix}:messages:{agent.uuid}", {b"\x80\xff garbage": 7})
        client.xadd(f"{prefix}:events", {"e": '{"kind": 5}'}, id="99-0")
        client.close()


def test_corrupted_records_give_a_clear_store_error(backend: Backend, store: Store) -> None:
    root = new_agent()
    healthy = new_agent()
    store.create_agents([root, healthy])
    store.append_message(root.uuid, "user", "hello")
    store.append_event("AgentForked", {})
    _corrupt(backend, root)
    with pytest.raises(StoreError, match=f"Corrupted agent record '{root.uuid}' in the store"):
        store.get_agent(root.uuid)
    with pytest.raises(StoreError, match="Corrupted agent record"):
        store.list_agents()
    unreadable: list[str] = []  # a listing that shows what it can
    assert store.list_agents(unreadable=unreadable) == [healthy]
    assert len(unreadable) == 1 and f"Corrupted agent record '{root.uuid}'" in unreadable[0]
    with pytest.raises(StoreError, match="Corrupted message record"):
        store.agent_messages(root.uuid)
    with pytest.raises(StoreError, match="Corrupted event record"):
        store.events()
    assert store.get_agent(healthy.uuid) == healthy  # one bad record spoils nothing else


def test_a_record_that_breaks_the_tree_rules_is_refused_on_read(
    backend: Backend, store: Store
) -> None:
    root = new_agent()
    store.create_agents([root])
    if backend.name == "sqlite":
        backend.raw_execute("UPDATE agents SET parent_uuid = uuid WHERE uuid = ?", root.uuid)
    else:
        client = backend.raw_redis()
        hostile = root.model_dump() | {"role": "child", "parent_uuid": root.uuid}
        client.set(
            f"{backend.namespace}:agent:{root.uuid}",
            AgentRecord.model_construct(**hostile).model_dump_json(),
        )
        client.close()
    with pytest.raises(
        StoreError, match=r"Corrupted agent record .*(a root agent has no parent|own parent)"
    ):
        store.conversation(root.uuid)


# ----- durability ----------------------------------------------------------------------------


def test_a_returned_write_survives_sigkill_of_the_writer(backend: Backend, store: Store) -> None:
    root = new_agent()
    store.create_agents([root])
    child = Child.start("append", backend.url, root.uuid)
    acknowledged: list[int] = []
    try:
        for _ in range(40):
            acknowledged.append(int(child.next_line(timeout_s=30.0)))
            # Another process reads while the child writes: what it acknowledged is there.
            assert (
                store.agent_messages(root.uuid, after_id=acknowledged[-1] - 1)[0].id
                == acknowledged[-1]
            )
    finally:
        child.kill()
    survivor = backend.open()
    stored = {message.id: message.content for message in survivor.agent_messages(root.uuid)}
    for number, message_id in enumerate(acknowledged):
        assert stored[message_id] == f"message {number}"


# ----- same conversations on both stores -----------------------------------------------------

Step = tuple[str, int, str]
steps = st.lists(
    st.one_of(
        st.tuples(
            st.just("say"), st.integers(0, 9), st.sampled_from(["user", "assistant", "clear"])
        ),
        st.tuples(
            st.just("fork"), st.integers(0, 9), st.sampled_from(["at-last", "midway", "fresh"])
        ),
    ),
    max_size=40,
)


def _fork_point(variant: str, last_id: int) -> int:
    """at-last: the usual fork; midway: an earlier point (the recursion must cap ancestors at
    it too); fresh: inherit nothing."""
    return {"at-last": last_id, "midway": last_id // 2, "fresh": 0}[variant]


def _reference_conversations(plan: list[Step]) -> dict[str, list[tuple[int, str, str]]]:
    """The spec's definition, computed naively: ancestors' messages up to each fork point,
    recursively, then the agent's own, cut after the last clear."""
    tree: dict[str, tuple[str | None, int]] = {"a0": (None, 0)}
    log: list[tuple[int, str, str, str]] = []
    for action, pick, variant in plan:
        agents = list(tree)
        target = agents[pick % len(agents)]
        if action == "say":
            log.append((len(log) + 1, target, variant, f"{target}/{len(log)}"))
        else:
            tree[f"a{len(tree)}"] = (target, _fork_point(variant, len(log)))

    def assembled(agent: str, cap: float) -> list[tuple[int, str, str, str]]:
        parent, fork_id = tree[agent]
        inherited = assembled(parent, min(cap, fork_id)) if parent and fork_id else []
        return inherited + [entry for entry in log if entry[1] == agent and entry[0] <= cap]

    result = {}
    for agent in tree:
        sequence = assembled(agent, math.inf)
        clears = [index for index, entry in enumerate(sequence) if entry[2] == "clear"]
        kept = sequence[clears[-1] + 1 :] if clears else sequence
        result[agent] = [(entry[0], entry[2], entry[3]) for entry in kept]
    return result


def _play(store: Store, plan: list[Step]) -> dict[str, list[tuple[int, str, str]]]:
    records = {"a0": AgentRecord(uuid="a0", role="root", created_at=0.0)}
    store.create_agents([records["a0"]])
    said = 0
    for action, pick, variant in plan:
        names = list(records)
        target = names[pick % len(names)]
        if action == "say":
            store.append_message(target, variant, f"{target}/{said}")
            said += 1
        else:
            name = f"a{len(records)}"
            fork_id = _fork_point(variant, store.last_message_id())
            records[name] = AgentRecord(
                uuid=name, role="child", parent_uuid=target, fork_message_id=fork_id, created_at=0.0
            )
            store.create_agents([records[name]])
    conversations = {name: store.conversation(name) for name in records}
    for name, conversation in conversations.items():  # where a fork made now branches off
        assert store.conversation_end(name) == (conversation[-1].id if conversation else 0)
    return {
        name: [(m.id, m.kind, m.content) for m in conversation]
        for name, conversation in conversations.items()
    }


# A fork point before the parent's own fork point: the grandparent's prefix is capped at it.
@example(plan=[("say", 0, "user")] * 4 + [("fork", 0, "at-last"), ("fork", 1, "midway")])
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=steps)
def test_random_forks_give_the_same_conversations_on_both_stores(
    plan: list[Step], redis_url: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    sqlite_store = open_store(f"sqlite:///{tmp_path_factory.mktemp('plan') / 'grove.sqlite3'}")
    redis_store = open_store(f"{redis_url}?namespace=plan-{uuid_module.uuid4().hex}")
    try:
        expected = _reference_conversations(plan)
        assert _play(sqlite_store, plan) == expected
        assert _play(redis_store, plan) == expected
    finally:
        sqlite_store.close()
        redis_store.close()
