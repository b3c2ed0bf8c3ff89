"""The service's batches over HTTP: submit a TASKS.jsonl file, list them, their progress, stop
one, its results, and the stream of its records as they are written (resumable).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import PlainTextResponse
from sse_starlette.event import ServerSentEvent
from sse_starlette.sse import EventSourceResponse
from starlette.concurrency import run_in_threadpool

from grove.providers.base import DEFAULT_OUTPUT_RETRIES, MAX_OUTPUT_RETRIES
from grove.server.batches import Batches, BatchRun
from grove.server.routes.fields import ForkOptionsIn
from grove.supervisor.batch.tasks import read_tasks

TICK_S = 1.0  # a follower hears at least this often while nothing finishes


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
        fork: Annotated[ForkOptionsIn, Query()],
        model: str | None = None,
        concurrency: int = 16,
        root: str | None = None,
        advisor: str | None = None,
        key: str | None = None,
        output_retries: int = DEFAULT_OUTPUT_RETRIES,
    ) -> dict[str, Any]:
        """The body is a TASKS.jsonl file; bad lines are refused before anything runs. The
        tasks become children of `root` (an agent made for the batch), else of a new root on
        `model`; `advisor` puts a reviewer on each; `key` names the batch, so that a batch
        submitted again under it takes the answers an interrupted one left; `fork`'s options
        (workspace, tools) go to every task's child alike. A task with
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
            "output_retries": output_retries,
            **fork.model_dump(exclude_none=True),
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
