"""`grove batch` output: the records of OUT.jsonl, what an earlier run left there, and appending.
One whole line per record, flushed at once; nothing here knows how tasks run.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any

from cli.batch_input import Task, TaskLineError, id_key
from cli.render import tool_exchanges

if TYPE_CHECKING:
    from actors.agent import TurnResult


@dataclass(frozen=True, kw_only=True, slots=True)
class PreviousRun:
    """What OUT.jsonl already says: ids whose last record is ok, error records of input lines,
    and how many of its lines could not be read."""

    done: frozenset[str] = frozenset()
    line_errors: frozenset[tuple[int, str]] = frozenset()
    unreadable: int = 0


def task_record(task: Task, agent: str | None, result: TurnResult | None) -> dict[str, Any]:
    """The output line of a finished task; a missing result is an error record."""
    if result is None:
        return error_record(task, agent, "the agent ended without a result")
    if not result.ok:
        failed = error_record(
            task,
            agent,
            result.error or "cancelled",
            usage=result.usage.as_dict(),
            cost_usd=result.cost_usd,
            saved_usd=result.saved_usd,
        )
        return {**failed, **worktree_fields(result)}
    return {
        "id": task.id,
        "agent": agent,
        "status": "ok",
        "text": result.text,
        "usage": result.usage.as_dict(),
        "cost_usd": result.cost_usd,
        "saved_usd": round(result.saved_usd, 8),
        "error": None,
        "advice": [],
        **tool_exchanges(result),
        **worktree_fields(result),
    }


def worktree_fields(result: TurnResult) -> dict[str, str]:
    """A task in a worktree: its branch and diff stat since the fork."""
    if result.worktree is None:
        return {}
    return {"branch": result.worktree["branch"], "diff_stat": result.worktree["diff_stat"]}


def error_record(
    task: Task,
    agent: str | None,
    error: str,
    *,
    usage: dict[str, int] | None = None,
    cost_usd: float = 0.0,
    saved_usd: float = 0.0,
) -> dict[str, Any]:
    return {
        "id": task.id,
        "agent": agent,
        "status": "error",
        "text": "",
        "usage": usage or {},
        "cost_usd": cost_usd,
        "saved_usd": round(saved_usd, 8),
        "error": error,
        "advice": [],
        "tool_calls": [],
        "tool_results": [],
    }


def skipped_record(task: Task, agent: str | None, reason: str) -> dict[str, Any]:
    """A task the batch did not run (or could not finish) because the budget was spent."""
    return {**error_record(task, agent, reason), "status": "skipped"}


def line_error_record(error: TaskLineError) -> dict[str, Any]:
    return {"id": None, "line": error.line, "status": "error", "error": error.message}


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


class OutputLog:
    """Appends records to OUT.jsonl. A torn last line (a run killed mid-write) is cut off
    first, so the file stays valid JSONL; that task simply runs again."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: IO[bytes] | None = None

    def __enter__(self) -> OutputLog:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = self.path.open("a+b")
        handle.seek(0, os.SEEK_END)
        size = handle.tell()
        if size:
            handle.seek(max(size - 1, 0))
            if handle.read(1) != b"\n":
                handle.seek(0)
                content = handle.read()
                handle.truncate(content.rfind(b"\n") + 1)
        self._file = handle
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def append(self, record: dict[str, Any]) -> None:
        """One whole line, written and flushed in one call."""
        assert self._file is not None, "OutputLog used outside its with block"
        self._file.write(json.dumps(record).encode("ascii") + b"\n")
        self._file.flush()
