"""The dashboard's tree view on a real SQLite store: only what events name is read again, a
cursor brings only the rows changed since, turns show from the events that begin and end them,
what no event names shows at the next full read, and agents of a tree no live Grove holds
show `stopped`, their turns not streaming.
"""

from __future__ import annotations

import math
import time
import uuid as uuid_module
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from grove.supervisor.store import AgentRecord, Store, open_store
from grove.supervisor.tree_view import TreeView, listing, tree_rows

MODEL = "claude-sonnet-5-5"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = open_store(f"sqlite:///{tmp_path / 'grove.sqlite3'}")
    yield opened
    opened.close()


def agent(parent: AgentRecord | None = None, **fields: Any) -> AgentRecord:
    return AgentRecord(
        uuid=str(uuid_module.uuid4()),
        role="root" if parent is None else "child",
        parent_uuid=None if parent is None else parent.uuid,
        provider="anthropic",
        model=MODEL,
        created_at=time.time(),
        **fields,
    )


def reply(store: Store, record: AgentRecord, tokens: int, cost: float) -> None:
    usage = {"input_tokens": tokens, "output_tokens": tokens}
    store.append_message(record.uuid, "assistant", "ok", {"usage": usage, "cost_usd": cost})


def uuids(answer: dict[str, Any]) -> set[str]:
    return {row["uuid"] for row in answer["agents"]}


def hold(store: Store, root: AgentRecord, holder: str = "grove-test", ttl_s: float = 60.0) -> None:
    """What a live Grove does when it takes a tree: it lives on, holds it, and says so."""
    store.renew_holder(holder, ttl_s)
    store.hold_trees(holder, [root.uuid])
    store.append_event("TreeHeld", {"agent": root.uuid, "holder": holder})


def test_a_cursor_brings_only_the_rows_events_named_since(store: Store) -> None:
    root = agent()
    first, second = agent(root), agent(root)
    store.create_agents([root, first, second])
    view = TreeView()
    whole = view.rows(store)
    assert whole["complete"] and uuids(whole) == {root.uuid, first.uuid, second.uuid}
    unchanged = view.rows(store, whole["cursor"])
    assert unchanged["agents"] == [] and not unchanged["complete"]

    reply(store, first, tokens=100, cost=0.5)
    store.append_event("TurnCompleted", {"agent": first.uuid})
    changed = view.rows(store, unchanged["cursor"])
    assert [(row["uuid"], row["tokens"], row["cost_usd"]) for row in changed["agents"]] == [
        (first.uuid, 200, 0.5)
    ]
    assert changed["trees"][root.uuid]["cost_usd"] == 0.5
    assert changed["agents"][0]["context_pct"] == 0  # 200 tokens of a 200,000-token window

    # A second reply adds to what was counted before (only the new message is read).
    reply(store, first, tokens=50, cost=0.25)
    store.append_event("TurnCompleted", {"agent": first.uuid})
    again = view.rows(store, changed["cursor"])
    assert [row["tokens"] for row in again["agents"]] == [300]
    assert again["trees"][root.uuid]["cost_usd"] == 0.75
    # The first cursor still brings both changes: nothing is missed by a slow reader.
    assert uuids(view.rows(store, whole["cursor"])) == {first.uuid}


def test_a_forks_children_and_a_killed_subtree_show_without_a_full_read(store: Store) -> None:
    root = agent()
    store.create_agents([root])
    view = TreeView(full_read_every_s=3600)
    cursor = view.rows(store)["cursor"]
    children = [agent(root) for _ in range(3)]
    store.create_agents(children)
    store.append_event("AgentsForked", {"parent": root.uuid, "count": 3})
    forked = view.rows(store, cursor)
    assert uuids(forked) == {child.uuid for child in children}
    for record in [root, *children]:
        store.update_agent(record.uuid, status="dead", ended_at=time.time())
    store.append_event("AgentKilled", {"agent": root.uuid})  # names the top of the subtree
    killed = view.rows(store, forked["cursor"])
    assert {row["uuid"]: row["status"] for row in killed["agents"]} == {
        record.uuid: "dead" for record in [root, *children]
    }


def test_a_change_no_event_names_shows_at_the_next_full_read(store: Store) -> None:
    root = agent()
    store.create_agents([root])
    view = TreeView(full_read_every_s=0.3, full_read_share=math.inf)
    cursor = view.rows(store)["cursor"]
    reply(store, root, tokens=10, cost=0.0)  # and no event
    assert view.rows(store, cursor)["agents"] == []
    time.sleep(0.35)
    assert [row["tokens"] for row in view.rows(store, cursor)["agents"]] == [20]


def test_full_reads_that_events_ask_for_wait_their_share_of_time(store: Store) -> None:
    root = agent()
    store.create_agents([root])
    # One reads whole whenever asked; the other waits a billion times a read's cost.
    eager, spaced = TreeView(full_read_share=math.inf), TreeView(full_read_share=1e-9)
    cursors = [view.rows(store)["cursor"] for view in (eager, spaced)]
    store.update_agent(root.uuid, name="renamed")  # a change no event names, then one that asks
    store.append_event("SupervisorStarted", {})
    assert [row["name"] for row in eager.rows(store, cursors[0])["agents"]] == ["renamed"]
    assert spaced.rows(store, cursors[1])["agents"] == []


def test_the_view_answers_as_a_single_read_does(store: Store) -> None:
    root = agent()
    child = agent(root)
    reviewer = AgentRecord(
        uuid=str(uuid_module.uuid4()),
        role="advisor",
        watched_uuid=child.uuid,
        provider="anthropic",
        model=MODEL,
        created_at=time.time(),
    )
    store.create_agents([root, child, reviewer])
    view = TreeView()
    cursor = view.rows(store)["cursor"]
    reply(store, child, tokens=5, cost=0.01)
    store.append_message(reviewer.uuid, "spent", "", {"usage": {"output_tokens": 7}})
    store.append_event("TurnCompleted", {"agent": child.uuid})
    changed = view.rows(store, cursor)
    assert uuids(changed) == {child.uuid, reviewer.uuid}  # a watched agent's reviewers too
    assert list(changed["trees"]) == [root.uuid]
    kept, once = view.rows(store), tree_rows(store)
    by_uuid = {row["uuid"]: row for row in kept["agents"]}
    assert by_uuid == {row["uuid"]: row for row in once["agents"]}
    assert kept["trees"] == once["trees"] == changed["trees"]
    assert once["trees"][root.uuid]["output_tokens"] == 12
    assert view.rows(store, changed["cursor"]) == {**changed, "agents": [], "trees": {}}


def turns(answer: dict[str, Any]) -> dict[str, str]:
    return {row["uuid"]: row["turn"] for row in answer["agents"]}


def test_a_turn_streams_from_its_start_or_its_fork_to_its_end(store: Store) -> None:
    root = agent()
    store.create_agents([root])
    hold(store, root)
    view = TreeView(full_read_every_s=3600)
    cursor = view.rows(store)["cursor"]
    store.append_event("TurnStarted", {"agent": root.uuid})
    started = view.rows(store, cursor)
    assert turns(started) == {root.uuid: "streaming"}
    store.append_event("TurnCompleted", {"agent": root.uuid})
    assert turns(view.rows(store, started["cursor"])) == {root.uuid: "idle"}

    fast, slow = agent(root), agent(root)
    store.create_agents([fast, slow])
    store.append_event("TurnCompleted", {"agent": fast.uuid})  # done before its fork's event
    store.append_event("AgentsForked", {"parent": root.uuid, "count": 2, "at": fast.created_at})
    forked = view.rows(store, started["cursor"])
    assert turns(forked) == {root.uuid: "idle", fast.uuid: "idle", slow.uuid: "streaming"}
    assert turns(TreeView().rows(store)) == turns(forked)  # a new view reads the recent events

    store.update_agent(slow.uuid, status="dead", ended_at=time.time())
    store.append_event("AgentKilled", {"agent": slow.uuid})
    assert turns(view.rows(store, forked["cursor"])) == {slow.uuid: "idle"}


def test_a_cursor_of_another_view_or_malformed_brings_every_row(store: Store) -> None:
    store.create_agents([agent()])
    cursor = TreeView().rows(store)["cursor"]
    for given in (cursor, "nonsense", ":", "x:-1", ""):
        assert TreeView().rows(store, given)["complete"]


def statuses(answer: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {row["uuid"]: (row["status"], row["turn"]) for row in answer["agents"]}


def test_agents_run_only_while_a_live_grove_holds_their_tree(store: Store) -> None:
    root = agent()
    child, gone = agent(root), agent(root, status="dead")
    store.create_agents([root, child, gone])
    store.append_event("TurnStarted", {"agent": child.uuid})  # its Grove exited mid-turn
    view = TreeView(full_read_every_s=3600)
    left = view.rows(store)
    assert statuses(left) == {
        root.uuid: ("stopped", "idle"),
        child.uuid: ("stopped", "idle"),
        gone.uuid: ("dead", "idle"),
    }
    # `grove agents` lists stopped agents (they can be resumed), ended ones only with --all.
    assert uuids(listing(left, include_ended=False)) == {root.uuid, child.uuid}

    hold(store, root)  # resumed: running, but the turn begun before it is not streaming
    taken = view.rows(store, left["cursor"])
    assert statuses(taken) == {root.uuid: ("running", "idle"), child.uuid: ("running", "idle")}
    store.append_event("TurnStarted", {"agent": child.uuid})
    began = view.rows(store, taken["cursor"])
    assert statuses(began) == {child.uuid: ("running", "streaming")}
    assert statuses(TreeView().rows(store)) == statuses(view.rows(store))  # read anew the same

    other = agent()
    store.create_agents([other])
    hold(store, other, holder="grove-other")
    store.drop_holder("grove-test")  # its Grove closed: no event, the holders say it
    closed = view.rows(store, began["cursor"])
    assert statuses(closed) == {
        root.uuid: ("stopped", "idle"),
        child.uuid: ("stopped", "idle"),
        other.uuid: ("running", "idle"),
    }


def test_a_grove_that_stopped_renewing_holds_nothing(store: Store) -> None:
    root = agent()
    store.create_agents([root])
    hold(store, root, ttl_s=0.3)  # then killed: it renews no more
    view = TreeView(full_read_every_s=3600)
    held = view.rows(store)
    assert statuses(held) == {root.uuid: ("running", "idle")}
    time.sleep(0.4)
    assert statuses(view.rows(store, held["cursor"])) == {root.uuid: ("stopped", "idle")}
