"""The todo state machine against spec/todo.md: each row of the state table, the targeting
rules, normalization after the batch, the error strings, completedTasks, the summary and the
markdown round trip.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from grove.actors.tools.todo import (
    Phase,
    Status,
    Task,
    TodoError,
    apply_todo,
    from_data,
    from_markdown,
    normalized,
    to_data,
    to_markdown,
)

STATUSES: tuple[Status, ...] = ("pending", "in_progress", "completed", "abandoned")


def state(*phases: tuple[str, list[tuple[str, Status]]]) -> tuple[Phase, ...]:
    return tuple(Phase(name, tuple(Task(c, s) for c, s in tasks)) for name, tasks in phases)


def statuses(phases: tuple[Phase, ...]) -> dict[str, Status]:
    return {t.content: t.status for p in phases for t in p.tasks}


def run(phases: tuple[Phase, ...], *ops: dict[str, Any]) -> Any:
    return apply_todo(phases, {"ops": list(ops)})


def one_of_each(target: Status) -> tuple[Phase, ...]:
    """The target task in `target` status, and an active task elsewhere (so normalization
    does not hide what the op did)."""
    other: Status = "in_progress" if target != "in_progress" else "pending"
    return state(("P", [("target", target), ("other", other), ("later", "pending")]))


@pytest.mark.parametrize("current", STATUSES)
def test_start_makes_the_target_the_one_in_progress(current: Status) -> None:
    outcome = run(one_of_each(current), {"op": "start", "task": "target"})
    found = statuses(outcome.phases)
    assert found["target"] == "in_progress"
    assert [s for s in found.values()].count("in_progress") == 1


@pytest.mark.parametrize(
    ("current", "op", "expected"),
    [
        ("pending", "done", "completed"),
        ("in_progress", "done", "completed"),
        ("completed", "done", "completed"),
        ("abandoned", "done", "completed"),
        ("pending", "drop", "abandoned"),
        ("in_progress", "drop", "abandoned"),
        ("completed", "drop", "abandoned"),
        ("abandoned", "drop", "abandoned"),
    ],
)
def test_done_and_drop_on_each_status(current: Status, op: str, expected: Status) -> None:
    outcome = run(one_of_each(current), {"op": op, "task": "target"})
    assert statuses(outcome.phases)["target"] == expected
    assert not outcome.is_error


@pytest.mark.parametrize("current", STATUSES)
def test_rm_removes_a_task_whatever_its_status(current: Status) -> None:
    outcome = run(one_of_each(current), {"op": "rm", "task": "target"})
    assert "target" not in statuses(outcome.phases)


@pytest.mark.parametrize("current", STATUSES)
def test_append_adds_pending_tasks_and_changes_no_status(current: Status) -> None:
    before = one_of_each(current)
    outcome = run(before, {"op": "append", "phase": "P", "items": ["new"]})
    found = statuses(outcome.phases)
    assert found["new"] == "pending"
    assert found["target"] == statuses(before)["target"]


def test_targeting_a_phase_or_everything() -> None:
    phases = state(("A", [("a1", "pending"), ("a2", "pending")]), ("B", [("b1", "pending")]))
    assert statuses(run(phases, {"op": "done", "phase": "A"}).phases) == {
        "a1": "completed",
        "a2": "completed",
        "b1": "in_progress",
    }
    assert set(statuses(run(phases, {"op": "drop"}).phases).values()) == {"abandoned"}
    cleared = run(phases, {"op": "rm", "phase": "A"}).phases
    assert [(p.name, len(p.tasks)) for p in cleared] == [("A", 0), ("B", 1)]
    everything = run(phases, {"op": "rm"})
    assert [len(p.tasks) for p in everything.phases] == [0, 0]
    assert everything.text == "Todo list cleared."


def test_init_replaces_and_append_creates_a_missing_phase() -> None:
    outcome = run(
        state(("Old", [("x", "pending")])),
        {"op": "init", "list": [{"phase": "Plan", "items": ["read", "write"]}]},
        {"op": "append", "phase": "Ship", "items": ["tag"]},
    )
    assert [p.name for p in outcome.phases] == ["Plan", "Ship"]
    assert statuses(outcome.phases) == {
        "read": "in_progress",
        "write": "pending",
        "tag": "pending",
    }


def test_normalization_runs_after_the_whole_batch_not_per_op() -> None:
    phases = state(("P", [("a", "pending"), ("b", "pending")]))
    outcome = run(phases, {"op": "start", "task": "a"}, {"op": "done", "task": "a"})
    assert statuses(outcome.phases) == {"a": "completed", "b": "in_progress"}
    several = state(("P", [("a", "in_progress"), ("b", "in_progress")]))
    assert statuses(normalized(several)) == {"a": "in_progress", "b": "pending"}


def test_view_alone_changes_and_normalizes_nothing() -> None:
    phases = state(("P", [("a", "pending"), ("b", "in_progress"), ("c", "in_progress")]))
    outcome = run(phases, {"op": "view"})
    assert outcome.phases == phases and not outcome.is_error


@pytest.mark.parametrize(
    ("ops", "error"),
    [
        ([{"op": "init"}], "Missing list for init operation"),
        (
            [{"op": "init", "list": [{"phase": "P", "items": []}]}],
            "Missing list for init operation",
        ),
        ([{"op": "start"}], "Missing task content"),
        ([{"op": "done", "task": "ghost"}], 'Task "ghost" not found'),
        ([{"op": "drop", "phase": ""}], "Missing phase name"),
        ([{"op": "rm", "phase": "Nope"}], 'Phase "Nope" not found'),
        ([{"op": "append", "items": ["x"]}], "Missing phase name for append operation"),
        ([{"op": "append", "phase": "P"}], "Missing items for append operation"),
        ([{"op": "append", "phase": "Q", "items": ["a"]}], 'Task "a" already exists'),
    ],
)
def test_each_error_string_and_later_ops_still_apply(ops: list[Any], error: str) -> None:
    phases = state(("P", [("a", "pending")]))
    outcome = apply_todo(phases, {"ops": [*ops, {"op": "append", "phase": "P", "items": ["z"]}]})
    assert outcome.is_error
    assert outcome.text.startswith(f"Errors: {error}")
    assert "z" in statuses(outcome.phases)  # no rollback: the later op applied


def test_not_found_on_an_empty_list_hints_what_to_do() -> None:
    outcome = run((), {"op": "start", "task": "a"})
    assert outcome.text.startswith(
        'Errors: Task "a" not found (the todo list is empty: use init or append first)'
    )


def test_completed_tasks_lists_only_new_completions() -> None:
    phases = state(("P", [("a", "completed"), ("b", "in_progress"), ("c", "pending")]))
    outcome = run(phases, {"op": "done", "task": "a"}, {"op": "done", "task": "b"})
    assert outcome.completed == ({"content": "b", "phase": "P"},)


def test_the_summary_shows_what_remains_the_current_phase_and_the_tree() -> None:
    phases = state(
        ("Build", [("parse", "completed"), ("store", "pending")]), ("Ship", [("tag", "pending")])
    )
    outcome = run(phases, {"op": "view"}, {"op": "start", "task": "store"})
    assert outcome.text == (
        "Remaining: 2 of 3 tasks\n- [/] store\n- [ ] tag\nCurrent phase: Build (1/2 done)\n\n"
        "# Build\n- [x] parse\n- [/] store\n\n# Ship\n- [ ] tag"
    )


def test_bad_calls_are_refused_whole() -> None:
    bad: list[dict[str, Any]] = [{}, {"ops": []}, {"ops": "init"}, {"ops": [{"op": "view"}] * 101}]
    for arguments in bad:
        with pytest.raises(TodoError):
            apply_todo((), arguments)


def test_markdown_accepts_the_alternative_marks_and_orphans() -> None:
    phases = from_markdown("- [ ] orphan\n# Work\n- [>] doing\n- [~] gave up\n* [X] did\n")
    assert [p.name for p in phases] == ["Todos", "Work"]
    assert statuses(phases) == {
        "orphan": "pending",
        "doing": "in_progress",
        "gave up": "abandoned",
        "did": "completed",
    }
    with pytest.raises(TodoError, match="line 2: not a `# Phase` heading"):
        from_markdown("# Work\njust prose\n")


names = (
    st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")), min_size=1, max_size=20)
    .map(str.strip)
    .filter(bool)
)


@given(
    st.lists(
        st.tuples(names, st.lists(st.tuples(names, st.sampled_from(STATUSES)), max_size=4)),
        max_size=4,
    )
)
def test_markdown_and_stored_data_round_trip(raw: list[Any]) -> None:
    phases = normalized(state(*((n, list(t)) for n, t in raw)))
    assert from_data(to_data(phases)) == phases
    if all(not n.startswith(("#", "-", "*")) for n, _ in raw):
        assert from_markdown(to_markdown(phases)) == phases


@given(st.text(max_size=200))
def test_markdown_parsing_fails_only_with_a_todo_error(text: str) -> None:
    with contextlib.suppress(TodoError):
        from_markdown(text)
