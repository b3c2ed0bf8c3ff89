"""The `todo` tool's state machine, as spec/todo.md describes it: ops applied in order, errors
collected, one task in progress after the batch, a text summary, and the markdown form.

Pure functions over plain data; the supervisor keeps each agent's list in the store.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from grove.providers.base import ToolSpec

Status = Literal["pending", "in_progress", "completed", "abandoned"]
OPS = ("init", "start", "done", "drop", "rm", "append", "view")
MAX_OPS = 100
MAX_PHASES = 50
MAX_TASKS = 500
MAX_TEXT_CHARS = 500
DEFAULT_PHASE = "Todos"
_MARKS: dict[Status, str] = {
    "pending": " ",
    "in_progress": "/",
    "completed": "x",
    "abandoned": "-",
}
_PARSED_MARKS: dict[str, Status] = {
    " ": "pending",
    "/": "in_progress",
    ">": "in_progress",
    "x": "completed",
    "X": "completed",
    "-": "abandoned",
    "~": "abandoned",
}
_TASK_LINE = re.compile(r"^\s*[-*]\s*\[(.)\]\s?(.*)$")
_HEADING = re.compile(r"^\s*#+\s*(.*?)\s*$")

TODO_SPEC = ToolSpec(
    name="todo",
    description=(
        "Keep a todo list of phases and tasks for the work at hand. Apply `ops` in order: "
        "init (replace the whole list), start (mark one task in progress), done, drop, rm "
        "(a task, a whole phase, or everything), append (new tasks to a phase, made if "
        "missing), view. Task contents and phase names are identifiers: keep them unique. "
        "Exactly one task is in progress after each call. Returns the list's summary."
    ),
    parameters={
        "type": "object",
        "properties": {
            "ops": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "properties": {
                        "op": {"type": "string", "enum": list(OPS)},
                        "list": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "properties": {
                                    "phase": {"type": "string"},
                                    "items": {
                                        "type": "array",
                                        "minItems": 1,
                                        "items": {"type": "string"},
                                    },
                                },
                                "required": ["phase", "items"],
                            },
                        },
                        "task": {"type": "string"},
                        "phase": {"type": "string"},
                        "items": {"type": "array", "minItems": 1, "items": {"type": "string"}},
                    },
                    "required": ["op"],
                },
            }
        },
        "required": ["ops"],
    },
)


class TodoError(ValueError):
    """Input that is not a todo call or list at all (the batch is not applied)."""


@dataclass(frozen=True, slots=True)
class Task:
    content: str
    status: Status = "pending"


@dataclass(frozen=True, slots=True)
class Phase:
    name: str
    tasks: tuple[Task, ...] = ()


@dataclass(frozen=True, slots=True)
class TodoOutcome:
    phases: tuple[Phase, ...]
    text: str
    is_error: bool
    completed: tuple[dict[str, str], ...] = field(default=())


def reads_only(arguments: dict[str, Any]) -> bool:
    """Whether a call only views the list (so it may run again without a second effect)."""
    ops = arguments.get("ops")
    return isinstance(ops, list) and all(
        isinstance(entry, dict) and entry.get("op") == "view" for entry in ops
    )


def apply_todo(phases: tuple[Phase, ...], arguments: dict[str, Any]) -> TodoOutcome:
    """One call of the tool: its ops in order, errors collected (later ops still apply),
    then the single-in-progress normalization (not for a batch of views alone)."""
    ops = arguments.get("ops")
    if not isinstance(ops, list) or not ops:
        raise TodoError("`ops` must be a non-empty list of operations")
    if len(ops) > MAX_OPS:
        raise TodoError(f"at most {MAX_OPS} operations in one call")
    working = [list(phase.tasks) for phase in phases]
    names = [phase.name for phase in phases]
    errors: list[str] = []
    for entry in ops:
        if not isinstance(entry, dict) or entry.get("op") not in OPS:
            errors.append(f"Unknown operation {_shown(entry)}: expected one of {', '.join(OPS)}")
            continue
        _apply(entry, names, working, errors)
    updated = tuple(Phase(name, tuple(tasks)) for name, tasks in zip(names, working, strict=True))
    if any(entry.get("op") != "view" for entry in ops if isinstance(entry, dict)):
        updated = normalized(updated)
    _check_size(updated)
    completed = completion_transitions(phases, updated)
    return TodoOutcome(updated, summary(updated, errors), bool(errors), completed)


def _apply(
    entry: dict[str, Any], names: list[str], working: list[list[Task]], errors: list[str]
) -> None:
    op = entry["op"]
    if op == "init":
        listed = entry.get("list")
        if not isinstance(listed, list) or not all(_is_phase_entry(p) for p in listed):
            errors.append("Missing list for init operation")
            return
        names[:] = [_text(p["phase"]) for p in listed]
        working[:] = [[Task(_text(item)) for item in p["items"]] for p in listed]
    elif op == "start":
        found = _task_or_error(entry, names, working, errors)
        if found is not None:
            for tasks in working:
                tasks[:] = [
                    replace(t, status="pending") if t.status == "in_progress" else t for t in tasks
                ]
            phase_index, task_index = found
            task = working[phase_index][task_index]
            working[phase_index][task_index] = replace(task, status="in_progress")
    elif op in ("done", "drop"):
        status: Status = "completed" if op == "done" else "abandoned"
        for phase_index, task_index in _targets(entry, names, working, errors):
            task = working[phase_index][task_index]
            working[phase_index][task_index] = replace(task, status=status)
    elif op == "rm":
        _remove(entry, names, working, errors)
    elif op == "append":
        _append(entry, names, working, errors)


def _task_or_error(
    entry: dict[str, Any], names: list[str], working: list[list[Task]], errors: list[str]
) -> tuple[int, int] | None:
    content = entry.get("task")
    if not isinstance(content, str) or not content:
        errors.append("Missing task content")
        return None
    for phase_index, tasks in enumerate(working):
        for task_index, task in enumerate(tasks):
            if task.content == content:
                return phase_index, task_index
    empty = not any(working)
    hint = " (the todo list is empty: use init or append first)" if empty else ""
    errors.append(f'Task "{content}" not found{hint}')
    return None


def _phase_or_error(entry: dict[str, Any], names: list[str], errors: list[str]) -> int | None:
    name = entry.get("phase")
    if not isinstance(name, str) or not name:
        errors.append("Missing phase name")
        return None
    if name not in names:
        errors.append(f'Phase "{name}" not found')
        return None
    return names.index(name)


def _targets(
    entry: dict[str, Any], names: list[str], working: list[list[Task]], errors: list[str]
) -> list[tuple[int, int]]:
    """One task, one phase's tasks, or every task, as the op names them."""
    if "task" in entry:
        found = _task_or_error(entry, names, working, errors)
        return [found] if found is not None else []
    if "phase" in entry:
        index = _phase_or_error(entry, names, errors)
        return [] if index is None else [(index, t) for t in range(len(working[index]))]
    return [(p, t) for p, tasks in enumerate(working) for t in range(len(tasks))]


def _remove(
    entry: dict[str, Any], names: list[str], working: list[list[Task]], errors: list[str]
) -> None:
    if "task" in entry:
        found = _task_or_error(entry, names, working, errors)
        if found is not None:
            del working[found[0]][found[1]]
    elif "phase" in entry:
        index = _phase_or_error(entry, names, errors)
        if index is not None:
            working[index].clear()
    else:
        for tasks in working:
            tasks.clear()


def _append(
    entry: dict[str, Any], names: list[str], working: list[list[Task]], errors: list[str]
) -> None:
    name, items = entry.get("phase"), entry.get("items")
    if not isinstance(name, str) or not name:
        errors.append("Missing phase name for append operation")
        return
    if not isinstance(items, list) or not items or not all(isinstance(i, str) for i in items):
        errors.append("Missing items for append operation")
        return
    if name not in names:
        names.append(_text(name))
        working.append([])
    tasks = working[names.index(name)]
    existing = {task.content for phase_tasks in working for task in phase_tasks}
    for item in items:
        if item in existing:
            errors.append(f'Task "{item}" already exists')
            continue
        tasks.append(Task(_text(item)))
        existing.add(item)


def normalized(phases: tuple[Phase, ...]) -> tuple[Phase, ...]:
    """Exactly one task in progress: the first of several stays; with none, the first
    pending task (in phase and task order) is promoted."""
    active = [t for phase in phases for t in phase.tasks if t.status == "in_progress"]
    first_pending = next(
        (t for phase in phases for t in phase.tasks if t.status == "pending"), None
    )
    keep = active[0] if active else first_pending

    def fixed(task: Task) -> Task:
        if task is keep:
            return replace(task, status="in_progress")
        return replace(task, status="pending") if task.status == "in_progress" else task

    return tuple(Phase(phase.name, tuple(fixed(t) for t in phase.tasks)) for phase in phases)


def completion_transitions(
    before: tuple[Phase, ...], after: tuple[Phase, ...]
) -> tuple[dict[str, str], ...]:
    """Tasks that became `completed` in this call."""
    done_before = {t.content for p in before for t in p.tasks if t.status == "completed"}
    return tuple(
        {"content": t.content, "phase": p.name}
        for p in after
        for t in p.tasks
        if t.status == "completed" and t.content not in done_before
    )


def summary(phases: tuple[Phase, ...], errors: list[str]) -> str:
    """What the model reads back: errors first, what remains, the current phase, the tree."""
    lines = [f"Errors: {'; '.join(errors)}"] if errors else []
    tasks = [(p, t) for p in phases for t in p.tasks]
    if not tasks:
        return "\n".join([*lines, "Todo list cleared."])
    remaining = [t for _, t in tasks if t.status in ("pending", "in_progress")]
    lines.append(f"Remaining: {len(remaining)} of {len(tasks)} tasks")
    lines += [f"- [{_MARKS[t.status]}] {t.content}" for t in remaining]
    current = next((p for p, t in tasks if t.status == "in_progress"), None)
    if current is not None:
        done = sum(t.status == "completed" for t in current.tasks)
        lines.append(f"Current phase: {current.name} ({done}/{len(current.tasks)} done)")
    lines += ["", to_markdown(phases)]
    return "\n".join(lines).rstrip()


def to_markdown(phases: tuple[Phase, ...]) -> str:
    """`# Phase` headings and `- [ ]`, `- [/]`, `- [x]`, `- [-]` tasks."""
    blocks = [
        "\n".join([f"# {p.name}", *(f"- [{_MARKS[t.status]}] {t.content}" for t in p.tasks)])
        for p in phases
    ]
    return "\n\n".join(blocks)


def from_markdown(text: str) -> tuple[Phase, ...]:
    """The markdown form read back (`>` also means in progress, `~` abandoned); tasks before
    any heading go to a `Todos` phase; then normalized. TodoError names a line it cannot read."""
    names: list[str] = []
    working: list[list[Task]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        task = _TASK_LINE.match(line)
        heading = _HEADING.match(line)
        if task and task.group(1) in _PARSED_MARKS:
            if not names:
                names.append(DEFAULT_PHASE)
                working.append([])
            working[-1].append(Task(_text(task.group(2).strip()), _PARSED_MARKS[task.group(1)]))
        elif heading and heading.group(1):
            names.append(_text(heading.group(1)))
            working.append([])
        else:
            raise TodoError(f"line {number}: not a `# Phase` heading or a `- [ ] task`: {line!r}")
    phases = tuple(Phase(n, tuple(t)) for n, t in zip(names, working, strict=True))
    _check_size(phases)
    return normalized(phases)


def to_data(phases: tuple[Phase, ...]) -> list[dict[str, Any]]:
    return [
        {"name": p.name, "tasks": [{"content": t.content, "status": t.status} for t in p.tasks]}
        for p in phases
    ]


def from_data(data: object) -> tuple[Phase, ...]:
    """A list kept in the store; TodoError for anything else."""
    if data is None:
        return ()
    if not isinstance(data, list):
        raise TodoError(f"a stored todo list that cannot be read: {type(data).__name__}")
    try:
        return tuple(
            Phase(
                str(p["name"]),
                tuple(Task(str(t["content"]), _status(t["status"])) for t in p["tasks"]),
            )
            for p in data
        )
    except (KeyError, TypeError) as exc:
        raise TodoError(f"a stored todo list that cannot be read: {exc!r}") from exc


def _status(value: object) -> Status:
    if value not in _MARKS:
        raise TypeError(f"unknown status {value!r}")
    return value


def _is_phase_entry(value: object) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("phase"), str)
        and bool(value["phase"])
        and isinstance(value.get("items"), list)
        and bool(value["items"])
        and all(isinstance(item, str) for item in value["items"])
    )


def _text(value: str) -> str:
    if len(value) > MAX_TEXT_CHARS:
        raise TodoError(f"a task or phase is {len(value):,} characters; at most {MAX_TEXT_CHARS}")
    return value


def _check_size(phases: tuple[Phase, ...]) -> None:
    if len(phases) > MAX_PHASES or sum(len(p.tasks) for p in phases) > MAX_TASKS:
        raise TodoError(f"a todo list holds at most {MAX_PHASES} phases and {MAX_TASKS} tasks")


def _shown(value: object) -> str:
    text = repr(value.get("op") if isinstance(value, dict) else value)
    return text if len(text) <= 40 else text[:37] + "..."
