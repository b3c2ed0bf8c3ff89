"""The skip stage of a batch: what an earlier run's OUT.jsonl already holds (the ids whose last
record is ok, the malformed lines it reported), so a rerun runs only the rest.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from grove.supervisor.batch.tasks import Task, id_key


@dataclass(frozen=True, kw_only=True, slots=True)
class PreviousRun:
    """What OUT.jsonl already says: ids whose last record is ok, error records of input lines,
    and how many of its lines could not be read."""

    done: frozenset[str] = frozenset()
    line_errors: frozenset[tuple[int, str]] = frozenset()
    unreadable: int = 0


def read_previous(path: Path) -> PreviousRun:
    """Read an earlier run's records; for each id the last record wins."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return PreviousRun()
    last_status: dict[str, str] = {}
    line_errors: set[tuple[int, str]] = set()
    unreadable = 0
    for raw in data.splitlines():
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except ValueError:
            unreadable += 1
            continue
        if not isinstance(record, dict):
            unreadable += 1
            continue
        task_id, status = record.get("id"), record.get("status")
        if isinstance(task_id, str | int | float) and not isinstance(task_id, bool):
            last_status[id_key(task_id)] = str(status)
        elif task_id is None and isinstance(record.get("line"), int):
            line_errors.add((record["line"], str(record.get("error"))))
        else:
            unreadable += 1
    return PreviousRun(
        done=frozenset(key for key, status in last_status.items() if status == "ok"),
        line_errors=frozenset(line_errors),
        unreadable=unreadable,
    )


def default_output(tasks_path: Path) -> Path:
    """TASKS.jsonl -> TASKS.out.jsonl beside it (any other name gets `.out.jsonl` added)."""
    stem = tasks_path.name.removesuffix(".jsonl")
    return tasks_path.with_name(f"{stem}.out.jsonl")


def still_to_run(tasks: list[Task], previous: PreviousRun) -> list[Task]:
    """The tasks whose id has no ok record yet, in order."""
    return [task for task in tasks if task.key not in previous.done]
