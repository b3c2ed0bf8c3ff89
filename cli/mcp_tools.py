"""The tools of `grove mcp` (cli/mcp_command.py) on the official SDK's `MCPServer`, run on the
service's Grove when one is up, else on one of the command's own.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from grove.cli.context import CliContext
from grove.cli.mcp_reach import Reach

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from grove.actors.turn_result import TurnResult
    from grove.supervisor.batch.tasks import Task
    from grove.supervisor.command_defaults import CommandDefaults
    from grove.supervisor.contract import GroveAPI

MAX_PROMPTS = 1000
MAX_WAIT_S = 3600.0
TURN_TIMEOUT_S = 3600.0
Prompt = Annotated[str, Field(min_length=1, description="What to ask.")]
ModelName = Annotated[
    str | None,
    Field(description="MODEL[/THINKING], e.g. claude-sonnet-5-5/med (default: the configured)."),
]
AgentId = Annotated[
    str, Field(min_length=1, description="An agent's id (a unique prefix will do).")
]


class BatchTask(BaseModel):
    """One task of `grove_batch` given whole (a plain string is a prompt alone)."""

    model_config = ConfigDict(extra="forbid")
    id: str | int | None = Field(None, description="The task's id (default: its position).")
    prompt: str = Field(min_length=1, description="What to ask.")
    model: str | None = Field(None, description="This task's MODEL[/THINKING].")
    system: str | None = Field(None, description="This task's system prompt.")


class Fleet:
    """The Grove the tools run on (the service's, or this command's own), what the
    configuration gives a command, and what the client reaches (cli/mcp_reach.py): the
    sessions the server made or was given (`granted`), with the approvals of `allow` and
    `[tools.policy]`, never more."""

    def __init__(
        self,
        context: CliContext,
        simulate: bool,
        hosts: int | None,
        *,
        granted: Sequence[str] = (),
        allow: Sequence[str] = (),
    ) -> None:
        self.context = context
        self.remote = context.remote(simulate=simulate, hosts=hosts)
        self.defaults: CommandDefaults = context.defaults(self.remote)
        self.allow = list(allow)
        self.reach = Reach(self.rows, self.defaults.policy, self.allow, granted)
        self.grove: GroveAPI = self.remote or context.local_grove(
            simulate=simulate, hosts=hosts or 1
        )

    def run(self, prompt: str, model: str | None, system: str | None) -> dict[str, Any]:
        root = self.grove.create_root(
            model or self.defaults.model,
            system=system,
            tools=self.defaults.tools(None, defaults=True),
            allow=self.allow,
        )
        self.reach.made(root.uuid)
        result = self.grove.send(root.uuid, prompt).result(TURN_TIMEOUT_S)
        if not result.ok:
            raise ValueError(f"the turn of agent {root.uuid} failed: {result.error or 'cancelled'}")
        return {"agent": root.uuid, **answer(result)}

    def fork(self, agent: str, prompts: list[str], model: str | None) -> dict[str, Any]:
        (parent,) = self.reach.reachable([agent])
        policy = self.grove.agent(parent).metadata.get("tool_policy", {})
        refusal = self.reach.fork_refusal(parent, policy)
        if refusal:
            raise ValueError(refusal)
        children = self.grove.fork_many(parent, prompts, model)
        self.reach.forked(children)
        return {"parent": parent, "children": children}

    def wait(self, agents: list[str], timeout_s: float) -> dict[str, Any]:
        """Each agent's turn result, waiting for all of them for at most `timeout_s` together;
        those still running are `pending`."""
        deadline = time.monotonic() + timeout_s
        results: dict[str, Any] = {}
        pending: list[str] = []
        for uuid in self.reach.reachable(agents):
            left = max(0.0, deadline - time.monotonic())
            result = self.grove.wait_turn(uuid, left)
            if result is None:
                pending.append(uuid)
            else:
                results[uuid] = answer(result)
        return {"results": results, "pending": pending}

    def agents(self) -> dict[str, Any]:
        return {"agents": self.reach.agents()}

    def batch(
        self, tasks: list[str | BatchTask], model: str | None, context: str | None
    ) -> dict[str, Any]:
        from grove.supervisor.batch.defaults import DEFAULT_CONCURRENCY

        checked = batch_tasks(tasks, self.defaults.aliases)
        root = self.grove.create_root(model or self.defaults.model)
        self.reach.made(root.uuid)
        if context:
            self.grove.seed(root.uuid, [("user", context)])
        steps = self.grove.run_batch(root.uuid, checked, concurrency=DEFAULT_CONCURRENCY)
        records = [step for step in steps if step is not None]
        return {"root": root.uuid, "records": records}

    def rows(self, include_ended: bool) -> list[dict[str, Any]]:
        """Every agent's row in the store of the Grove the tools run on, as `grove agents` has
        them (this command's own Grove: read from the store, not from the service)."""
        if self.remote is not None:
            from grove.server.remote_reads import RemoteReads

            reads = RemoteReads(self.remote.link)  # closed with the Grove
            found: list[dict[str, Any]] = reads.agents(include_ended)["agents"]
            return found
        from grove.supervisor.reads import StoreReads

        settings = self.context.settings()
        with StoreReads(settings.store, keep_days=settings.events.keep_days) as opened:
            listed: list[dict[str, Any]] = opened.agents(include_ended)["agents"]
            return listed


def answer(result: TurnResult) -> dict[str, Any]:
    """What a tool says of a turn: the HTTP API's result with its tool calls and results (a
    refused one says why, and how to allow it) as `grove run --json` has them, instead of its
    stored entries."""
    from grove.supervisor.results import result_json, tool_exchanges

    found = {key: value for key, value in result_json(result).items() if key != "entries"}
    return {**found, **tool_exchanges(result)}


def batch_tasks(tasks: list[str | BatchTask], aliases: dict[str, str]) -> list[Task]:
    """The tasks checked as `grove batch` checks its lines (ids unique, models known, none
    retired); ValueError naming every task that is wrong."""
    from grove.providers.errors import ModelSpecError
    from grove.providers.lifecycle import chosen_model
    from grove.supervisor.batch.tasks import TaskLineError, parse_task_line

    checked: list[Task] = []
    problems: list[str] = []
    seen: set[str] = set()
    for number, given in enumerate(tasks, start=1):
        fields: dict[str, Any] = (
            {"prompt": given} if isinstance(given, str) else given.model_dump(exclude_none=True)
        )
        fields.setdefault("id", number)
        try:
            task = parse_task_line(json.dumps(fields), number, aliases)
        except TaskLineError as exc:
            problems.append(f"task {number}: {exc.message}")
            continue
        assert task is not None  # the line is a JSON object, never blank
        if task.model is not None:
            try:
                chosen_model(task.model)
            except ModelSpecError as exc:  # a retired model: what `grove batch` refuses too
                problems.append(f"task {number}: 'model': {exc}")
        if task.key in seen:
            problems.append(f"task {number}: the id {task.id!r} is used twice")
        seen.add(task.key)
        checked.append(task)
    if problems:
        raise ValueError("; ".join(problems))
    return checked


def mcp_server(fleet: Fleet) -> MCPServer:
    """The server and its tools on `fleet`, whose Grove starts when the server does."""
    from anyio import to_thread
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    from grove.providers.errors import GroveError

    @asynccontextmanager
    async def started(_: MCPServer) -> AsyncIterator[None]:
        await to_thread.run_sync(fleet.grove.start)
        try:
            yield None
        finally:
            await to_thread.run_sync(fleet.grove.close)

    server = MCPServer(
        "grove",
        instructions="Run prompts on a Grove fleet of agents: fork many children of an agent, "
        "wait for their answers, run a batch of tasks.",
        lifespan=started,
    )

    async def on_fleet(method: Callable[..., dict[str, Any]], *args: Any) -> dict[str, Any]:
        """A Fleet method in a worker thread (the protocol's loop goes on meanwhile); Grove's
        refusals and bad arguments come back as the tool's error."""
        try:
            found = await to_thread.run_sync(method, *args)
        except (GroveError, ValueError) as exc:  # the caller's to read: said as it is
            raise ToolError(str(exc)) from exc
        return found

    @server.tool()
    async def grove_run(
        prompt: Prompt, model: ModelName = None, system: str | None = None
    ) -> dict[str, Any]:
        """Run one prompt through a new root agent and return its answer: `text` (or `error`),
        usage, cost and the root's id in `agent` (to fork from or read later)."""
        return await on_fleet(fleet.run, prompt, model, system)

    @server.tool()
    async def grove_fork(
        agent: AgentId,
        prompts: Annotated[list[Prompt], Field(min_length=1, max_length=MAX_PROMPTS)],
        model: ModelName = None,
    ) -> dict[str, Any]:
        """Fork one child of `agent` per prompt (each starts from the agent's conversation so
        far) and start them all at once; returns the children's ids, in order, without
        waiting: read their answers with grove_wait."""
        return await on_fleet(fleet.fork, agent, prompts, model)

    @server.tool()
    async def grove_wait(
        agents: Annotated[list[AgentId], Field(min_length=1, max_length=MAX_PROMPTS)],
        timeout_s: Annotated[float, Field(ge=0, le=MAX_WAIT_S)] = 60.0,
    ) -> dict[str, Any]:
        """Wait for the agents' turns to end, at most `timeout_s` seconds in all; `results`
        holds each finished agent's answer by id, `pending` the ids still running."""
        return await on_fleet(fleet.wait, agents, timeout_s)

    @server.tool()
    async def grove_agents() -> dict[str, Any]:
        """The running and stopped agents of the sessions this server made (and of those it was
        given), oldest first: id, parent, model, state, usage."""
        return await on_fleet(fleet.agents)

    @server.tool()
    async def grove_batch(
        tasks: Annotated[list[str | BatchTask], Field(min_length=1, max_length=MAX_PROMPTS)],
        model: ModelName = None,
        context: Annotated[
            str | None, Field(description="A shared context every task starts from.")
        ] = None,
    ) -> dict[str, Any]:
        """Run tasks (prompts, or {id, prompt, model, system}) as children of one new root that
        holds the shared `context`, many at once, and return every task's record (id, status,
        text or error, usage, cost) when all have ended."""
        return await on_fleet(fleet.batch, tasks, model, context)

    return server
