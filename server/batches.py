"""The service's batches: each runs in a thread of its own on the service's Grove through the
batch pipeline (supervisor/batch/) and keeps its records in a file, which server/routes/
batches.py streams to whoever follows. A restarted service takes up the batches it had not
finished (server/batch_files.py).
"""

from __future__ import annotations

import dataclasses
import sys
import threading
import time
import uuid as uuidlib
from pathlib import Path
from typing import Any

from grove.server.batch_files import BatchFiles, described_batches, read_recorded
from grove.supervisor.api import Grove
from grove.supervisor.batch.records import OutputLog, record_results
from grove.supervisor.batch.summary import Totals
from grove.supervisor.batch.tasks import Task, read_tasks

MAX_BATCH_BYTES = 64 * 1024 * 1024  # what server/gates.py's BodyLimit lets a batch be


class BatchRun:
    """A batch the service runs: its progress, its records (a file), its end. `options` are
    run_batch's (concurrency, advisor, key, output_retries and the fork options)."""

    def __init__(
        self, files: BatchFiles, root: str, totals: Totals, options: dict[str, Any]
    ) -> None:
        self.files = files
        self.id = files.id
        self.root = root
        self.totals = totals
        self.options = options
        self.output = files.output
        self.started = time.time()
        self.finished: float | None = None
        self.error: str | None = None
        self.stop = threading.Event()
        self.steps = 0  # records written and ticks passed, for followers to wait on
        self.changed = threading.Condition()

    def work(self, grove: Grove, tasks: list[Task], closing: threading.Event) -> None:
        """Run the batch to its end (or its stop); followers are told of each step. An end
        that is the service's own (`closing`) is not the batch's: its next start goes on."""
        try:
            with OutputLog(self.output) as log:
                steps = grove.run_batch(self.root, tasks, stop=self.stop, **self.options)
                for _ in record_results(steps, log, self.totals):
                    with self.changed:
                        self.steps += 1
                        self.changed.notify_all()
        except Exception as exc:  # the batch's end, reported by its progress and its stream
            self.error = f"{type(exc).__name__}: {exc}"
        if closing.is_set():
            return
        with self.changed:
            self.finished = time.time()
            self.changed.notify_all()
        self.files.describe(self.description())

    def wait(self, seen: int, timeout_s: float) -> int:
        """Wait until a step after the `seen`-th one, or the end, or the timeout; the steps."""
        with self.changed:
            self.changed.wait_for(lambda: self.steps > seen or self.finished, timeout_s)
            return self.steps

    def description(self) -> dict[str, Any]:
        """What batch_files.py keeps of it: enough to run the rest, or to show its end."""
        return {
            "root": self.root,
            "options": self.options,
            "started": self.started,
            "finished": self.finished,
            "error": self.error,
            "totals": dataclasses.asdict(self.totals),
        }

    def as_dict(self) -> dict[str, Any]:
        totals = self.totals
        return {
            "id": self.id,
            "root": self.root,
            "total": totals.total,
            "done": totals.done,
            "ok": totals.ok,
            "failed": totals.failed,
            "invalid_output": totals.invalid_output,
            "skipped": totals.over_budget,
            "tokens": totals.tokens,
            "cost_usd": round(totals.cost_usd, 6),
            "started": self.started,
            "finished": self.finished,
            "error": self.error,
        }


class Batches:
    """The batches of the service's `grove`, their files under `directory`."""

    def __init__(self, grove: Grove, directory: Path) -> None:
        self.grove = grove
        self.directory = directory
        self.runs: dict[str, BatchRun] = {}
        self.closing = threading.Event()  # the service is stopping: a batch's end is not its own

    def running(self) -> int:
        """How many of its batches have not ended."""
        return sum(run.finished is None for run in self.runs.values())

    def start(self, run: BatchRun, tasks: list[Task]) -> None:
        self.runs[run.id] = run
        thread = threading.Thread(
            target=run.work, args=(self.grove, tasks, self.closing), name=f"batch-{run.id}"
        )
        thread.daemon = True
        thread.start()

    def submit(
        self, body: bytes, tasks: list[Task], root: str, options: dict[str, Any]
    ) -> BatchRun:
        files = BatchFiles(directory=self.directory, id=uuidlib.uuid4().hex[:12])
        options["key"] = options["key"] or files.id
        run = BatchRun(files, root, Totals(total=len(tasks)), options)
        files.create(body, run.description())
        self.start(run, tasks)
        return run

    def resume(self) -> None:
        """After a restart: the batches this service ran, those it had not finished taken up
        again. Their tasks already recorded are not run again, nor those whose answer the
        store holds (run_batch takes those), and turns cut off resume from their last step."""
        for files, described in described_batches(self.directory):
            try:
                self._take_up(files, described)
            except (OSError, ValueError, KeyError, TypeError) as exc:
                sys.stderr.write(f"batch {files.id} cannot be taken up again: {exc!r}\n")

    def _take_up(self, files: BatchFiles, described: dict[str, Any]) -> None:
        totals = Totals(**described["totals"])
        run = BatchRun(files, described["root"], totals, described["options"])
        run.started = float(described["started"])
        if described["finished"] is not None:
            run.finished, run.error = float(described["finished"]), described["error"]
            self.runs[run.id] = run
            return
        tasks = read_tasks(
            files.tasks.read_bytes(), self.grove.settings.models.aliases, what="the batch"
        ).tasks
        recorded = read_recorded(files.output, totals.total)
        run.totals = recorded.totals
        self.start(run, [task for task in tasks if task.key not in recorded.ids])
