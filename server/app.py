"""The HTTP API (FastAPI): roots, prompts (JSON or a stream of Server-Sent Events), commands,
forks, kills, the tree, history, advice, usage, batches and the event log, over one `Grove`.

Every route but /healthz needs the bearer token (a header, or `?token=` for the dashboard's
own page and event streams, which browsers cannot give headers to); server/gates.py checks
that, the Host, body sizes and open streams. Streams wait on the event loop, never in a thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import FileResponse, JSONResponse
from pydantic import AfterValidator, BaseModel, Field
from sse_starlette.event import ServerSentEvent
from sse_starlette.sse import EventSourceResponse
from starlette.concurrency import run_in_threadpool

from grove.providers.base import DEFAULT_OUTPUT_RETRIES, MAX_OUTPUT_RETRIES
from grove.providers.errors import GroveError
from grove.server.batches import MAX_BATCH_BYTES, Batches, batch_router
from grove.server.feeds import EventFeed
from grove.server.gates import BearerTokenGate, BodyLimit, HostGate, StreamLimit
from grove.server.idle import ClientCount, Clients, clients_router
from grove.supervisor.api import Grove
from grove.supervisor.async_api import AsyncGrove
from grove.supervisor.batch.tasks import MAX_TEXT_BYTES
from grove.supervisor.budget_rules import Budget
from grove.supervisor.command_defaults import command_defaults
from grove.supervisor.reads import StoreReads, event_json
from grove.supervisor.results import result_json
from grove.supervisor.store import EventRecord, Store, open_store
from grove.supervisor.tool_files import importable
from grove.supervisor.tree_view import AGENT_FIELDS, TreeView, listing, message_json
from grove.supervisor.usage import GROUPINGS

STATIC = Path(__file__).parent / "static"
EVENT_WAIT_S = 1.0  # how long an event stream waits for news before it looks again
TREE_EVERY_S = 0.3  # the tree's stream sends what changed at most this often
TREE_IDLE_S = 5.0  # and without events (what changes agents), looks again this often
MAX_NAME_CHARS = 200
MAX_NAMES = 256


def _within_text_limit(text: str) -> str:
    size = len(text.encode("utf-8", errors="surrogatepass"))
    if size > MAX_TEXT_BYTES:
        raise ValueError(f"is {size:,} bytes; the limit is {MAX_TEXT_BYTES:,}")
    return text


# Every text a root or a prompt takes: a prompt's size (as a batch task's), or a name's.
Text = Annotated[str, AfterValidator(_within_text_limit)]
Name = Annotated[str, Field(max_length=MAX_NAME_CHARS)]
Names = Annotated[list[Name], Field(max_length=MAX_NAMES)]


class RootIn(BaseModel):
    model: Name | None = Field(default=None, description="MODEL[/THINKING]; else [defaults]")
    system: Text | None = None
    tools: Names | None = Field(
        default=None, description="built-in names, mcp__SERVER, package.module:attr"
    )
    tool_files: dict[Name, Text] = Field(
        default_factory=dict,
        max_length=MAX_NAMES,
        description="source files of the tools' modules by relative path (modules the "
        "service cannot import itself)",
    )
    allow: Names = Field(default_factory=list, description="tools that need no asking")
    budget: dict[str, Any] | None = Field(default=None, description="Budget(...) fields")
    output_type: dict[str, Any] | None = Field(
        default=None, description="a JSON schema (its root an object): every answer typed"
    )
    output_retries: int = Field(
        default=DEFAULT_OUTPUT_RETRIES,
        ge=0,
        le=MAX_OUTPUT_RETRIES,
        description="how many times a malformed answer goes back to the model",
    )


class PromptIn(BaseModel):
    text: Text = Field(min_length=1)
    stream: bool = Field(default=False, description="true: Server-Sent Events of the deltas")
    wait: bool = Field(
        default=True,
        description="false (without stream): answer once the turn has begun; /wait has its result",
    )


class CommandIn(BaseModel):
    line: Text = Field(min_length=1, description="a command line, as typed in the chat")
    origin: str = Field(default="api", max_length=40, description="who typed it, for events")


class TodoIn(BaseModel):
    markdown: Text


class AttendIn(BaseModel):
    attend: bool = Field(description="true: the session's approval requests come in its streams")


class DecisionIn(BaseModel):
    decision: Literal["y", "n", "a"] = Field(description="yes, no, or always for the session")


class WorktreesIn(BaseModel):
    repository: str = Field(min_length=1, max_length=4096, description="a path in the repository")
    prune: bool = False


class ForkIn(BaseModel):
    prompts: list[Text] = Field(min_length=1, max_length=10_000)
    model: Name | None = None
    budget: dict[str, Any] | None = None
    workspace: Literal["shared", "worktree"] | None = Field(
        default=None, description="worktree: each child in a git worktree of its own"
    )


class SeedIn(BaseModel):
    messages: list[tuple[Literal["user", "assistant"], Text]] = Field(
        min_length=1, description="(kind, content) pairs appended to the history, no turn run"
    )


def create_app(
    grove: Grove, token: str, batch_dir: Path, clients: Clients | None = None
) -> FastAPI:
    """The API over a started `grove`; batches write their records under `batch_dir`; its
    requests are counted in `clients` (server/idle.py)."""
    aio = AsyncGrove(grove)  # the same Grove, for the routes that wait: nothing blocks the loop
    feed = EventFeed(lambda: open_store(grove.settings.store))
    batches = Batches(grove, batch_dir)
    clients = clients or Clients()
    clients.running = lambda: grove.turns_in_flight() + batches.running()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await run_in_threadpool(batches.resume)  # what a restart cut off goes on
        yield
        batches.closing.set()
        await feed.close()

    app = FastAPI(
        title="Grove",
        summary="Many LLM agents as actors: roots, forks, advisors, batches, budgets.",
        version="1",
        lifespan=lifespan,
    )
    service = grove.settings.service
    # The last added runs first: Host, the token, open streams, body sizes, then the count.
    app.add_middleware(ClientCount, clients=clients)
    app.add_middleware(BodyLimit, limits={("POST", "/api/batches"): MAX_BATCH_BYTES})
    app.add_middleware(StreamLimit, per_token=service.max_streams)
    app.add_middleware(BearerTokenGate, token=token)
    app.add_middleware(HostGate, allowed=service.allowed_hosts)
    app.include_router(batch_router(batches))
    app.include_router(clients_router(clients))
    tree = TreeView()  # the dashboard asks for the tree often: unchanged agents are not read

    def store() -> Store:
        return open_store(grove.settings.store)

    def reads() -> StoreReads:
        return StoreReads(grove.settings.store, keep_days=grove.settings.events.keep_days)

    @app.exception_handler(GroveError)
    async def grove_error(request: Request, exc: GroveError) -> JSONResponse:
        text = str(exc)
        status = 404 if text.startswith(("Unknown agent", "No agent")) else 400
        return JSONResponse({"error": text}, status_code=status)

    @app.get("/healthz")
    def healthz() -> dict[str, bool]:
        return {"ok": True}

    @app.get("/", include_in_schema=False)
    def dashboard() -> FileResponse:
        return FileResponse(STATIC / "index.html", media_type="text/html")

    @app.get("/api/settings")
    def settings() -> dict[str, Any]:
        """What a command line takes from the service's configuration: the default model,
        aliases, the roots' default tools, how a budget given with it is kept, and what it
        checks before it starts (the providers with a key here, MCP servers that cannot
        start; never a key)."""
        simulated = grove.simulate or grove.endpoint is not None
        return command_defaults(grove.settings, simulated=simulated).as_dict()

    @app.get("/api/agents")
    def agents(since: str | None = None, include_ended: bool | None = None) -> dict[str, Any]:
        """Every agent with its tokens, cost and share of its context window, each tree's
        totals, and a `cursor`: given as `since`, only the agents changed after that answer
        come (`complete` is false then). With `include_ended`, the list `grove agents` shows:
        oldest first, only running agents unless it is true."""
        opened = store()
        try:
            answer = tree.rows(opened, since)
        finally:
            opened.close()
        return answer if include_ended is None else listing(answer, include_ended)

    @app.get("/api/tree/stream")
    async def tree_stream(request: Request, since: str | None = None) -> EventSourceResponse:
        """The tree as it changes, one `rows` event at most every 0.3 s, shaped as the
        answers of /api/agents: the first holds every agent (or those changed after `since`),
        each later one what changed after the one before. Each event's id is its cursor, so
        a reconnect with Last-Event-ID resumes. The tree is read again when the event log
        grows (or after TREE_IDLE_S), not every 0.3 s whatever happens."""
        cursor = request.headers.get("last-event-id") or since

        async def follow() -> AsyncIterator[bytes]:
            nonlocal cursor
            await feed.start()
            opened = await run_in_threadpool(store)
            try:
                first = True
                while not await request.is_disconnected():
                    seen = feed.last_id  # what these rows have seen at least
                    answer = await run_in_threadpool(tree.rows, opened, cursor)
                    if first or answer["agents"] or answer["trees"] or answer["complete"]:
                        cursor, first = answer["cursor"], False
                        data = json.dumps(answer)
                        yield ServerSentEvent(id=cursor, event="rows", data=data).encode()
                    await asyncio.sleep(TREE_EVERY_S)
                    await feed.after(seen, TREE_IDLE_S)  # a quiet tree is not read again
            finally:
                opened.close()

        return EventSourceResponse(follow())

    @app.post("/api/roots", status_code=201)
    def create_root(body: RootIn) -> dict[str, Any]:
        try:
            budget = Budget.from_dict(body.budget) if body.budget else None
        except ValueError as exc:
            raise HTTPException(400, str(exc)) from exc
        with importable(body.tool_files):
            record = grove.create_root(
                body.model,
                system=body.system,
                tools=body.tools or (),
                allow=body.allow,
                budget=budget,
                output_type=body.output_type,
                output_retries=body.output_retries,
            )
        return record.model_dump(include=AGENT_FIELDS)

    @app.post("/api/agents/{agent}/prompts", response_model=None)
    async def prompt(agent: str, body: PromptIn) -> dict[str, Any] | EventSourceResponse:
        turn = await aio.send((await aio.agent(agent)).uuid, body.text)
        if not body.stream:
            return result_json(await turn.result()) if body.wait else {"agent": turn.agent}

        async def deltas() -> AsyncIterator[dict[str, str]]:
            async for kind, text in turn:
                yield {"event": "delta", "data": json.dumps({"kind": kind, "text": text})}
            result = await turn.result()
            yield {"event": "result", "data": json.dumps(result_json(result))}

        return EventSourceResponse(deltas())

    @app.get("/api/agents/{agent}/stream")
    def watch(agent: str) -> EventSourceResponse:
        """The deltas of the agent's turn in progress, to its end (then `end`)."""
        uuid = grove.agent(agent).uuid

        async def deltas() -> AsyncIterator[dict[str, str]]:
            async for kind, text in aio.watch(uuid):
                yield {"event": "delta", "data": json.dumps({"kind": kind, "text": text})}
            yield {"event": "end", "data": "{}"}

        return EventSourceResponse(deltas())

    @app.post("/api/agents/{agent}/commands")
    def command(agent: str, body: CommandIn) -> dict[str, Any]:
        outcome = grove.dispatch(grove.agent(agent).uuid, body.line, body.origin)
        return {"ok": outcome.ok, "text": outcome.text, "data": outcome.data}

    @app.get("/api/agents/{agent}")
    def agent_record(agent: str) -> dict[str, Any]:
        """The agent's record (a unique prefix of its uuid will do), with what its tools may do
        without asking in `metadata.tool_policy`."""
        found = grove.agent(agent)
        record: dict[str, Any] = found.model_dump(include=AGENT_FIELDS)
        record["metadata"] = {"tool_policy": found.metadata.get("tool_policy", {})}
        return record

    @app.get("/api/agents/{agent}/wait")
    async def wait(agent: str, timeout: float = 60.0) -> dict[str, Any]:  # noqa: ASYNC109
        """The result of the agent's turn in progress once it ends (or of its last turn);
        `result` is null when none ended within `timeout` seconds."""
        uuid = (await aio.agent(agent)).uuid
        result = await aio.wait_turn(uuid, max(0.0, min(timeout, 3600.0)))
        return {"agent": uuid, "result": None if result is None else result_json(result)}

    @app.post("/api/agents/{agent}/cancel")
    def cancel(agent: str) -> dict[str, bool]:
        return {"cancelled": grove.cancel(grove.agent(agent).uuid)}

    @app.get("/api/sessions/{session}/focus")
    def focus(session: str) -> dict[str, str]:
        """The agent a session (a root) speaks to now: /switch moves it."""
        return {"agent": grove.focus(grove.agent(session).uuid)}

    @app.post("/api/sessions/{session}/approvals")
    def attend(session: str, body: AttendIn) -> dict[str, bool]:
        """A client that asks a person about tools whose policy is "ask": their requests come
        in the session's turn streams as `approval` deltas, answered at /api/approvals/ID."""
        grove.attend_approvals(grove.agent(session).uuid, body.attend)
        return {"attend": body.attend}

    @app.post("/api/approvals/{request}")
    def answer(request: str, body: DecisionIn) -> dict[str, str]:
        return {"text": grove.answer_approval(request, body.decision)}

    @app.post("/api/sessions/{session}/todo")
    def set_todo(session: str, body: TodoIn) -> dict[str, str]:
        return {"text": grove.set_todo(grove.agent(session).uuid, body.markdown)}

    @app.post("/api/agents/{agent}/fork", status_code=201)
    def fork(agent: str, body: ForkIn) -> dict[str, list[str]]:
        budget = Budget.from_dict(body.budget) if body.budget else None
        parent = grove.agent(agent).uuid
        children = grove.fork_many(
            parent, body.prompts, body.model, budget=budget, workspace=body.workspace
        )
        return {"children": children}

    @app.post("/api/agents/{agent}/kill")
    def kill(agent: str) -> dict[str, Any]:
        uuid = grove.agent(agent).uuid
        outcome = grove.dispatch(uuid, f"/kill {uuid} --yes")
        return {"ok": outcome.ok, "text": outcome.text}

    @app.post("/api/agents/{agent}/seed", status_code=201)
    def seed(agent: str, body: SeedIn) -> dict[str, list[int]]:
        """Messages appended to the agent's history at once, running no turn: a shared
        context its children inherit (`grove batch --context`)."""
        stored = grove.seed(grove.agent(agent).uuid, list(body.messages))
        return {"ids": [message.id for message in stored]}

    @app.get("/api/agents/{agent}/history")
    def history(agent: str) -> dict[str, Any]:
        with reads() as opened:
            return opened.history(agent)

    @app.get("/api/agents/{agent}/advice")
    def advice(agent: str) -> dict[str, Any]:
        uuid = grove.agent(agent).uuid
        return {"agent": uuid, "advice": [message_json(m) for m in grove.advice(uuid)]}

    @app.get("/api/usage")
    def usage(by: str = "agent", agent: str | None = None) -> dict[str, Any]:
        if by not in GROUPINGS:
            raise HTTPException(400, f"by is one of {', '.join(GROUPINGS)}, not {by!r}")
        with reads() as opened:
            return opened.usage(agent, by)

    @app.get("/api/models")
    def models(include_retired: bool = False, provider: str | None = None) -> dict[str, Any]:
        """The catalog as `grove models` shows it, with each model's standing on the
        service's day."""
        return {"models": grove.models(include_retired, provider)}

    @app.get("/api/events")
    def events(after: int = 0, limit: int = 1000) -> dict[str, Any]:
        with reads() as opened:
            return {"events": opened.events(after, max(1, min(limit, 10_000)))}

    @app.post("/api/events/trim")
    def trim_events() -> dict[str, Any]:
        """Delete the events older than [events] keep_days now (the service also does it
        every hour)."""
        with reads() as opened:
            return opened.trim_events()

    @app.post("/api/worktrees")
    def worktrees(body: WorktreesIn) -> dict[str, Any]:
        """Grove's worktrees of the repository at `repository` (a path on the service's
        machine), with their agents, branches and diff stats; `prune` removes those of ended
        agents and those merged into HEAD, as `grove worktrees --prune` does."""
        with reads() as opened:
            return {"worktrees": opened.worktrees(body.repository, body.prune)}

    @app.get("/api/events/stream")
    async def event_stream(request: Request, after: int = 0) -> EventSourceResponse:
        """The event log as it grows; reconnecting with Last-Event-ID resumes after it."""
        resume = request.headers.get("last-event-id")
        start = int(resume) if resume and resume.isdigit() else after

        async def follow() -> AsyncIterator[bytes]:
            await feed.start()
            last = start
            while not await request.is_disconnected():
                batch = await feed.after(last, EVENT_WAIT_S)
                if batch:  # one write for the lot
                    last = batch[-1].id
                    yield b"".join(map(event_bytes, batch))

        return EventSourceResponse(follow())

    return app


def event_bytes(event: EventRecord) -> bytes:
    """The event as one Server-Sent Event, its id the event's."""
    data = json.dumps(event_json(event))
    return ServerSentEvent(id=str(event.id), event=event.kind, data=data).encode()
