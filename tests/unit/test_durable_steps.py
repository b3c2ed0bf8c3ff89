"""Durable turns, the pure parts: which calls never returned, when a stored agent's turn is
still open, what a step's events are, and billing that counts a reply stored as a step once
whichever of the two words about it comes first.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from grove.actors.agent.choice import ModelChoice
from grove.actors.agent.steps import INTERRUPTED_FACT, open_calls
from grove.actors.host.tickets import Ticket
from grove.actors.tools.todo import reads_only
from grove.actors.transcript import parts_to_data
from grove.actors.turn_result import NewEntry, TurnResult
from grove.providers.base import Message, TextPart, ToolCallPart, ToolResultPart
from grove.supervisor.billing import InFlightBilling
from grove.supervisor.holding import new_holder, unheld_agents
from grove.supervisor.store import open_store
from grove.supervisor.store.records import AgentRecord, MessageRecord, NewMessage
from grove.supervisor.turns import fork_end, seeded_messages, step_events, turn_messages, turn_open


def call(call_id: str, name: str = "mark") -> ToolCallPart:
    return ToolCallPart(call_id=call_id, name=name, arguments={}, signature=None)


def result(call_id: str, name: str = "mark") -> ToolResultPart:
    return ToolResultPart(call_id=call_id, name=name, content="ok", is_error=False)


def test_open_calls_are_those_of_the_last_reply_without_a_result() -> None:
    reply = Message(role="assistant", parts=(TextPart(text="on it"), call("a"), call("b")))
    prompt = Message.user("do it")
    assert open_calls([prompt, reply]) == [call("a"), call("b")]
    partly = Message(role="user", parts=(result("b"),))
    assert open_calls([prompt, reply, partly]) == [call("a")]
    whole = Message(role="user", parts=(result("b"), result("a")))
    assert open_calls([prompt, reply, whole]) == []
    answered = Message(role="assistant", parts=(TextPart(text="done"),))
    assert open_calls([prompt, reply, whole, answered]) == []
    assert open_calls([prompt]) == [] and open_calls([]) == []


def message(kind: str, parts: list[Any] | None = None, index: int = 1) -> MessageRecord:
    data = {"parts": parts_to_data(parts)} if parts is not None else {}
    return MessageRecord(id=index, agent_uuid="a", kind=kind, content="", data=data, created_at=0.0)


def test_a_turn_is_open_until_its_answer_or_end_is_stored() -> None:
    prompt = message("user")
    step = message("assistant", [call("a")])
    assert turn_open([prompt])
    assert turn_open([prompt, step])
    assert turn_open([prompt, step, message("tool_result", [result("a")])])
    assert not turn_open([prompt, step, message("assistant", [TextPart(text="done")])])
    assert not turn_open([prompt, step, message("turn_end")])
    assert not turn_open([])


def stored(new: list[NewMessage], first: int = 2) -> list[MessageRecord]:
    return [
        MessageRecord(id=first + i, created_at=0.0, **m.model_dump(exclude={"ticket"}))
        for i, m in enumerate(new)
    ]


def test_a_turn_that_ended_before_any_reply_is_not_open_any_more() -> None:
    prompt = message("user")
    choice = ModelChoice(provider="anthropic", model="claude-sonnet-4-5")
    ticket = Ticket(ticket_id="t", uuid="a", user=None, choice=choice)
    for ended in (
        TurnResult(cancelled=True, error="cancelled"),
        TurnResult(error="ProviderConnectionError: refused"),
    ):
        # else a restarted supervisor would run a cancelled (or failed) prompt again
        assert not turn_open([prompt, *stored(turn_messages(ticket, ended))])


def test_a_seeded_context_is_no_turn_to_resume() -> None:
    new = seeded_messages("a", [("assistant", "earlier"), ("user", "the shared context")])
    assert [m.kind for m in new] == ["assistant", "user"]
    assert not turn_open(stored(new))


def test_step_events_name_each_call_result_and_interruption() -> None:
    reply = NewEntry(kind="assistant", content="", data={"parts": parts_to_data([call("a")])})
    assert step_events("x", reply) == [
        ("ToolCalled", {"agent": "x", "tool": "mark", "call_id": "a"})
    ]
    cut = NewEntry(
        kind="tool_result",
        content="",
        data={"parts": parts_to_data([result("a")]), "calls": {"a": {INTERRUPTED_FACT: True}}},
    )
    assert step_events("x", cut) == [
        ("ToolInterrupted", {"agent": "x", "tool": "mark", "call_id": "a"})
    ]
    again = NewEntry(
        kind="tool_result",
        content="",
        data={"parts": parts_to_data([result("a")]), "calls": {"a": {"rerun": True}}},
    )
    ((kind, payload),) = step_events("x", again)
    assert kind == "ToolResulted" and payload["rerun"] is True
    assert step_events("x", NewEntry(kind="user", content="hi", data={})) == []


def test_a_reply_stored_as_a_step_is_not_kept_as_spent_whatever_came_first() -> None:
    billing = InFlightBilling()
    first, second = {"cost_usd": 1.0}, {"cost_usd": 2.0}
    billing.seen("t", "a", first)
    billing.step_stored("t", first)  # the usual order
    billing.step_stored("t", second)  # the step's store overtook the word of its bill
    billing.seen("t", "a", second)
    billing.seen("t", "a", {"cost_usd": 3.0})  # a reply that never got stored
    assert [m.data for m in billing.lost("t")] == [{"cost_usd": 3.0}]


def test_a_todo_call_that_only_views_may_run_again() -> None:
    assert reads_only({"ops": [{"op": "view"}, {"op": "view"}]})
    assert not reads_only({"ops": [{"op": "view"}, {"op": "done", "task": "x"}]})
    assert not reads_only({"ops": "view"})


def test_a_child_forked_mid_step_branches_off_before_the_reply_still_running_its_calls(
    tmp_path: Path,
) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'g.sqlite3'}")
    try:
        parent = AgentRecord(uuid="p", role="root", created_at=time.time())
        (prompt,) = store.create_agents(
            [parent], [NewMessage(agent_uuid="p", kind="user", content="go")]
        )
        assert fork_end(store, parent) == prompt.id

        def add(kind: str, parts: list[Any]) -> int:
            data = {"parts": parts_to_data(parts)}
            return store.append_message("p", kind, "", data).id

        add("assistant", [call("a"), call("b")])  # its calls run: `fork` among them
        assert fork_end(store, parent) == prompt.id
        add("tool_result", [result("a")])
        assert fork_end(store, parent) == prompt.id
        whole = add("tool_result", [result("b")])  # the step is whole: inherited
        assert fork_end(store, parent) == whole
        answer = add("assistant", [TextPart(text="done")])
        assert fork_end(store, parent) == answer
    finally:
        store.close()


def test_a_restarted_supervisor_leaves_the_open_turns_of_another_live_grove_alone(
    tmp_path: Path,
) -> None:
    """Those run on the Grove that holds them; its own (held, or lapsed while Ray restarted
    it) and those of a Grove that is gone resume."""
    store = open_store(f"sqlite:///{tmp_path / 'g.sqlite3'}")
    try:
        now = time.time()
        roots = [AgentRecord(uuid=uuid, role="root", created_at=now) for uuid in "abc"]
        child = AgentRecord(uuid="a1", role="child", parent_uuid="a", created_at=now)
        answered = AgentRecord(uuid="a2", role="child", parent_uuid="a", created_at=now)
        prompts = [NewMessage(agent_uuid=r.uuid, kind="user", content="go") for r in roots]
        reviewers = [
            AgentRecord(uuid=f"r{w}", role="advisor", watched_uuid=w, created_at=now) for w in "ab"
        ]
        store.create_agents(
            [*roots, child, answered, *reviewers],
            [*prompts, NewMessage(agent_uuid="a1", kind="user", content="go")],
        )
        store.append_message("a2", "assistant", "done", {})
        mine, other = new_holder(), new_holder()
        for holder, root in ((mine, "a"), (other, "b")):  # "c": its Grove is gone
            store.renew_holder(holder, 60.0)
            store.hold_trees(holder, [root])
        unheld = unheld_agents(store, mine)
        assert sorted(r.uuid for r in unheld) == ["a", "a1", "a2", "c", "ra"]  # not rb, b
        open_turns = [r.uuid for r in unheld if turn_open(store.agent_messages(r.uuid))]
        assert sorted(open_turns) == ["a", "a1", "c"]
    finally:
        store.close()
