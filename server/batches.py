"""The service's batches: each runs in a thread of its own on the service's Grove through the
batch pipeline (supervisor/batch/), keeps its records in a file, and streams them to whoever
follows (`grove batch` with a service up), with ticks while none finishes and an end.
"""

from __future__ import annotations

import asyncio
import json
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

from providers.base import DEFAULT_OUTPUT_RETRIES, MAX_OUTPUT_RETRIES
from server.files import private_file
from supervisor.api import Grove
from supervisor.batch.records import OutputLog, record_results
from supervisor.batch.summary import Totals
from supervisor.batch.tasks import Task, read_tasks

MAX_BATCH_BYTES = 64 * 1024 * 1024  # what server/gates.py's BodyLimit lets a batch be
TICK_S = 1.0  # a follower hears at least this often while nothing finishes


class BatchRun:
    """A batch the service runs: its progress, its records (a file), its end."""

    def __init__(self, batch_id: str, root: str, total: int, output: Path) -> None:
        self.id = batch_id
        self.root = root
        self.totals = Totals(total=total)
        self.output = output
        self.started = time.time()
        self.finished: float | None = None
        self.error: str | None = None
        self.stop = threading.Event()
        self.steps = 0  # records written and ticks passed, for followers to wait on
        self.changed = threading.Condition()

    def work(self, grove: Grove, tasks: list[Task], concurrency: int, **options: Any) -> None:
        """Run the batch to its end (or its stop); followers are told of each step."""
        try:
            with OutputLog(self.output) as log:
                steps = grove.run_batch(
                    self.root, tasks, concurrency=concurrency, stop=self.stop, **options
                )
                for _ in record_results(steps, log, self.totals):
                    with self.changed:
                        self.steps += 1
                        self.changed.notify_all()
        except Exception as exc:  # the batch's end, reported by its progress and its stream
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            with self.changed:
                self.finished = time.time()
                self.changed.notify_all()

    def wait(self, seen: int, timeout_s: float) -> int:
        """Wait until a step after the `seen`-th one, or the end, or the timeout; the steps."""
        with self.changed:
            self.changed.wait_for(lambda: self.steps > seen or self.finished, timeout_s)
            return self.steps

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


def batch_router(grove: Grove, batch_dir: Path) -> APIRouter:
    """The routes of the batches run on `grove`, their records kept under `batch_dir`."""
    router = APIRouter()
    batches: dict[str, BatchRun] = {}

    def known(batch: str) -> BatchRun:
        run = batches.get(batch)
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
        a `schema` answers typed, a malformed answer going back `output_retries` times."""
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
        batch_id = uuidlib.uuid4().hex[:12]
        output = private_file(batch_dir / f"{batch_id}.jsonl")  # prompts and replies: 0600
        run = BatchRun(batch_id, parent, len(tasks.tasks), output)
        batches[run.id] = run
        threading.Thread(
            target=run.work,
            args=(grove, tasks.tasks, concurrency),
            kwargs={
                "advisor": advisor,
                "key": key or run.id,
                "workspace": workspace,
                "output_retries": output_retries,
            },
            name=f"batch-{run.id}",
            daemon=True,
        ).start()
        return run.as_dict()

    @router.get("/api/batches")
    def list_batches() -> dict[str, list[dict[str, Any]]]:
        return {"batches": [run.as_dict() for run in batches.values()]}

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
        it is over. Reconnecting with Last-Event-ID resumes after that line."""
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
