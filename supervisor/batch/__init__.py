"""Batch jobs, a pipeline each batch walks through once: read the tasks (tasks.py), skip what
an earlier run finished (done.py), fork them in chunks (runner.py), record (records.py), sum
up (summary.py). Built on the `Grove` API: `grove batch` and the service run the same stages.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from grove.supervisor.batch.defaults import DEFAULT_CONCURRENCY
    from grove.supervisor.batch.done import PreviousRun, default_output, read_previous, still_to_run
    from grove.supervisor.batch.records import OutputLog, line_error_record, record_results
    from grove.supervisor.batch.runner import BatchRunner, Step, batch_key
    from grove.supervisor.batch.summary import Totals, summary_line
    from grove.supervisor.batch.tasks import (
        ContextError,
        InputTooLarge,
        Task,
        TaskFile,
        TaskLineError,
        read_context,
        read_tasks,
        task_json,
    )

# Each name's home, imported on first use (reading a batch's totals does not load the model
# catalog that reading its tasks needs).
_HOMES = {
    "PreviousRun": "done",
    "default_output": "done",
    "read_previous": "done",
    "still_to_run": "done",
    "OutputLog": "records",
    "line_error_record": "records",
    "record_results": "records",
    "DEFAULT_CONCURRENCY": "defaults",
    "BatchRunner": "runner",
    "Step": "runner",
    "batch_key": "runner",
    "Totals": "summary",
    "summary_line": "summary",
    "ContextError": "tasks",
    "InputTooLarge": "tasks",
    "Task": "tasks",
    "TaskFile": "tasks",
    "TaskLineError": "tasks",
    "read_context": "tasks",
    "read_tasks": "tasks",
    "task_json": "tasks",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'grove.supervisor.batch' has no attribute {name!r}")
    return getattr(import_module(f"grove.supervisor.batch.{home}"), name)


__all__ = [
    "DEFAULT_CONCURRENCY",
    "BatchRunner",
    "ContextError",
    "InputTooLarge",
    "OutputLog",
    "PreviousRun",
    "Step",
    "Task",
    "TaskFile",
    "TaskLineError",
    "Totals",
    "batch_key",
    "default_output",
    "line_error_record",
    "read_context",
    "read_previous",
    "read_tasks",
    "record_results",
    "still_to_run",
    "summary_line",
    "task_json",
]
