"""The record stage of a batch: each task's line (ok, invalid_output, error, skipped; a malformed
input line's), and OUT.jsonl, appended one whole, flushed line at a time. Nothing runs tasks here.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any

from grove.supervisor.results import tool_exchanges

if TYPE_CHECKING:
    from grove.actors.turn_result import TurnResult
    from grove.supervisor.batch.summary import Totals
    from grove.supervisor.batch.tasks import Task, TaskLineError


def task_record(
    task: Task, agent: str | None, result: TurnResult | None, *, typed: bool = False
) -> dict[str, Any]:
    """The output line of a finished task; a missing result is an error record. A `typed`
    task's line carries its checked `output` (null unless ok), and an answer that stayed
    malformed after its retries is `invalid_output`, its raw text kept and its last problem
    the error."""
    answer = output_fields(result) if typed else {}
    if result is None:
        return {**error_record(task, agent, "the agent ended without a result"), **answer}
    if not result.ok:
        failed = error_record(
            task,
            agent,
            result.error or "cancelled",
            usage=result.usage.as_dict(),
            cost_usd=result.cost_usd,
            saved_usd=result.saved_usd,
        )
        return {**failed, **worktree_fields(result), **answer}
    return {
        "id": task.id,
        "agent": agent,
        "status": "ok" if result.output_error is None else "invalid_output",
        "text": result.text,
        "usage": result.usage.as_dict(),
        "cost_usd": result.cost_usd,
        "saved_usd": round(result.saved_usd, 8),
        "error": result.output_error,
        "advice": [],
        **tool_exchanges(result),
        **worktree_fields(result),
        **answer,
    }


def output_fields(result: TurnResult | None) -> dict[str, Any]:
    """A typed task's answer: the checked output (JSON data), how many answers went back to
    the model, and what their requests used (counted in `usage` too)."""
    if result is None:
        from grove.providers.base import Usage

        return {"output": None, "output_retries": 0, "retry_usage": Usage().as_dict()}
    output = result.output
    if hasattr(output, "model_dump"):  # read into the caller's pydantic model
        output = output.model_dump(mode="json", by_alias=True)
    return {
        "output": output if result.ok and result.output_error is None else None,
        "output_retries": result.output_retries,
        "retry_usage": result.retry_usage.as_dict(),
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


class OutputLog:
    """Appends records to OUT.jsonl. A torn last line (a run killed mid-write) is cut off
    first, so the file stays valid JSONL; that task simply runs again."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: IO[bytes] | None = None

    def __enter__(self) -> OutputLog:
        return self if self._file is not None else self.opened()

    def opened(self) -> OutputLog:
        """Open the file (and its directories) now, so that an OSError comes before the
        `with` block; entering it then uses this handle."""
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


def record_results(
    results: Iterable[dict[str, Any] | None], log: OutputLog, totals: Totals
) -> Iterator[Totals]:
    """Append each record of `results` to `log` and count it in `totals`; the totals after each
    item (a None is a tick of a run with nothing finishing: the totals as they are)."""
    for record in results:
        if record is not None:
            log.append(record)
            totals.count(record)
        yield totals
