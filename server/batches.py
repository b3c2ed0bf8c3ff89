"""The service's batches: each runs in a thread of its own on the service's Grove through the
batch pipeline (supervisor/batch/), keeps its records in a file, and streams them to whoever
follows (`grove batch` with a service up), with ticks while none finishes and an end. A restarted
service takes up the batches it had not finished (server/batch_files.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
import threading
import time
import uuid as uuidlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Literal

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import PlainTextResponse
from sse_starlette.event import ServerSentEvent
from sse_starlette.sse import EventSourceResponse
from starlette.concurrency import run_in_threadpool

from grove.providers.base import DEFAULT_OUTPUT_RETRIES, MAX_OUTPUT_RETRIES
from grove.server.batch_files import BatchFiles, described_batches, read_recorded
from grove.supervisor.api import Grove
from grove.supervisor.batch.records import OutputLog, record_results
from grove.supervisor.batch.summary import Totals
from grove.supervisor.batch.tasks import Task, read_tasks

MAX_BATCH_BYTES = 64 * 1024 * 1024  # what server/gates.py's BodyLimit lets a batch be
TICK_S = 1.0  # a follower hears at least this often while nothing finishes


class BatchRun:
    """A batch the service runs: its progress, its records (a file), its end. `options` are
    run_batch's (concurrency, advisor, key, workspace, output_retries)."""

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


def batch_router(batches: Batches) -> APIRouter:
    """The routes of the service's batches."""
    router = APIRouter()
    grove = batches.grove

    def known(batch: str) -> BatchRun:
        run = batches.runs.get(batch)
        if run is None:
            raise HTTPException(404, f"Unknown batch: {batch}")
        return run

    @router.post("/api/batches", status_code=202)
    async def submit_batch(
        request: Request,
        model: str | None = None,
        concurrency: int = 16,
        root: str | None = None,
        advisor: str | None = None,
        key: str | None = None,
        workspace: Literal["worktree", "shared"] | None = None,
        output_retries: int = DEFAULT_OUTPUT_RETRIES,
    ) -> dict[str, Any]:
        """The body is a TASKS.jsonl file; bad lines are refused before anything runs. The
        tasks become children of `root` (an agent made for the batch), else of a new root on
        `model`; `advisor` puts a reviewer on each; `key` names the batch, so that a batch
        submitted again under it takes the answers an interrupted one left; `workspace`:
        "worktree" puts each task in a git worktree of the service's repository. A task with
        a `schema` answers typed, a malformed answer going back `output_retries` times. The
        batch outlives a restart of the service, which takes it up again."""
        if not 1 <= concurrency <= 10_000:
            raise HTTPException(400, "concurrency is 1 to 10,000")
        if not 0 <= output_retries <= MAX_OUTPUT_RETRIES:
            raise HTTPException(400, f"output_retries is 0 to {MAX_OUTPUT_RETRIES}")
        body = await request.body()  # at most MAX_BATCH_BYTES: server/gates.py's BodyLimit
        tasks = read_tasks(body, grove.settings.models.aliases, what="the batch")
        if tasks.errors:
            lines = [f"line {error.line}: {error.message}" for error in tasks.errors[:20]]
            raise HTTPException(400, {"error": "the batch has bad lines", "lines": lines})
        if not tasks.tasks:
            raise HTTPException(400, "the batch holds no tasks")
        if root is None:
            parent = await run_in_threadpool(lambda: grove.create_root(model).uuid)
        else:
            parent = await run_in_threadpool(lambda: grove.agent(root).uuid)
        options = {
            "concurrency": concurrency,
            "advisor": advisor,
            "key": key,
            "workspace": workspace,
            "output_retries": output_retries,
        }
        run = await run_in_threadpool(batches.submit, body, tasks.tasks, parent, options)
        return run.as_dict()

    @router.get("/api/batches")
    def list_batches() -> dict[str, list[dict[str, Any]]]:
        return {"batches": [run.as_dict() for run in batches.runs.values()]}

    @router.get("/api/batches/{batch}")
    def batch_progress(batch: str) -> dict[str, Any]:
        return known(batch).as_dict()

    @router.post("/api/batches/{batch}/stop")
    def stop_batch(batch: str) -> dict[str, Any]:
        """Stop scheduling and cancel the tasks in flight (they run again on a rerun)."""
        run = known(batch)
        run.stop.set()
        return run.as_dict()

    @router.get("/api/batches/{batch}/results")
    def batch_results(batch: str) -> PlainTextResponse:
        run = known(batch)
        text = run.output.read_text() if run.output.exists() else ""
        return PlainTextResponse(text, media_type="application/x-ndjson")

    @router.get("/api/batches/{batch}/records")
    async def batch_records(request: Request, batch: str, after: int = 0) -> EventSourceResponse:
        """The batch's records as they are written (`record`, its id its line number), a
        `tick` with the progress after each quiet second, and `end` with the progress once
        it is over. Reconnecting with Last-Event-ID (or `after`) resumes after that line,
        also after a restart of the service."""
        run = known(batch)
        resume = request.headers.get("last-event-id")
        seen = int(resume) if resume and resume.isdigit() else max(after, 0)
        return EventSourceResponse(follow_records(request, run, seen))

    return router


async def follow_records(request: Request, run: BatchRun, seen: int) -> AsyncIterator[bytes]:
    """What /api/batches/ID/records sends, from the record after line `seen`."""
    read, position, steps = 0, 0, 0
    spoke = time.monotonic()
    while not await request.is_disconnected():
        finished = run.finished is not None  # read before the file: nothing is missed
        steps = run.steps
        lines, position = await asyncio.to_thread(new_lines, run.output, position)
        events = []
        for line in lines:
            read += 1
            if read > seen:
                events.append(ServerSentEvent(id=str(read), event="record", data=line).encode())
        quiet = time.monotonic() - spoke
        if events:
            yield b"".join(events)
        elif finished:
            yield ServerSentEvent(event="end", data=json.dumps(run.as_dict())).encode()
            return
        elif quiet >= TICK_S:
            yield ServerSentEvent(event="tick", data=json.dumps(run.as_dict())).encode()
        else:
            await asyncio.to_thread(run.wait, steps, TICK_S - quiet)
            continue
        spoke = time.monotonic()


def new_lines(path: Path, position: int) -> tuple[list[str], int]:
    """The whole lines of `path` after byte `position`, and the position after them."""
    try:
        with path.open("rb") as file:
            file.seek(position)
            data = file.read()
    except FileNotFoundError:
        return [], position
    whole = data[: data.rfind(b"\n") + 1]
    return whole.decode().splitlines(), position + len(whole)
