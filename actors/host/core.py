"""`AgentHostCore`: many agents in one process, activated lazily, each turn run as the host's
own task (a caller that stops reading does not stop the turn) and streamed in chunks.

Plain asyncio logic, all of HostAPI (actors/contract.py); actor.py makes it a Ray actor.
"""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from grove.actors.advisor import RETRY_DELAY_S, Reviewer
from grove.actors.advisor_messages import Report, ReviewerSpec
from grove.actors.agent.batched import BatchPort
from grove.actors.agent.budget_guard import BudgetPort
from grove.actors.agent.choice import ModelChoice, ProviderFactory
from grove.actors.agent.compaction import Recover
from grove.actors.agent.metering import FleetPort
from grove.actors.agent.tool import Tool
from grove.actors.agent.turn_loop import MAX_STEPS_PER_TURN, Agent
from grove.actors.host.pools import DEFAULT_IDLE_POOLS, DEFAULT_IDLE_RELEASE_S, IdlePools
from grove.actors.host.provider_jobs import ProviderJobs, ToolsFactory
from grove.actors.host.runs import TurnRun, TurnRuns
from grove.actors.host.tickets import Activation, Ticket
from grove.actors.telemetry import NO_TRACING, Tracing
from grove.actors.tools.grove_git import WorktreeError
from grove.actors.tools.worktrees import Worktree, missing_text, settle
from grove.actors.transcript import Entry, add_part, fork_point, join_messages, to_messages
from grove.actors.turn_result import NewEntry, TurnResult
from grove.providers.base import AssistantTurn, CachePolicy, Message
from grove.providers.google.cache import CachedContent

# Tells the supervisor what a request of a turn may be billed at most before it is sent, and
# what it was billed as soon as it ends: (ticket id, agent, the data its reply is stored with,
# without its parts; an estimate's is marked `estimated`, actors/agent/estimates.py).
Billed = Callable[[str, str, dict[str, Any]], Awaitable[None]]
# Stores finished steps of a turn as they end (actors/agent/steps.py StoreSteps, for this ticket).
StepStore = Callable[[Ticket, list[tuple[int, NewEntry]]], Awaitable[list[int] | None]]
ReportResult = Callable[[Ticket, TurnResult], Awaitable[None]]
# A reviewer's tools (the read-only workspace tools and `advise`, say), built for its spec.
ReviewerTools = Callable[[ReviewerSpec], dict[str, Tool]]


@dataclass(frozen=True, kw_only=True, slots=True)
class HostParts:
    """What a host's core is built with: where its providers, tools and reports come from and
    go, the supervisor's gates its requests pass, and what its agents share."""

    make_provider: ProviderFactory
    report: ReportResult  # a finished turn, to the supervisor
    make_tools: ToolsFactory | None = None
    recover: Recover | None = None  # compacts an agent's context (the supervisor)
    budget: BudgetPort | None = None
    fleet: FleetPort | None = None
    batch: BatchPort | None = None  # the supervisor's collectors, for requests on the batch tier
    billed: Billed | None = None
    steps: StepStore | None = None  # None: turns are not stored step by step
    tracing: Tracing = NO_TRACING  # the spans of its agents' turns
    reviewer_tools: ReviewerTools | None = None  # None (or no `reviewed`): no reviewers here
    reviewed: Report | None = None
    cache: CachePolicy | None = None  # `[cache]` of every agent here (None: caching off)
    idle_release_s: float = DEFAULT_IDLE_RELEASE_S
    idle_pools: int = DEFAULT_IDLE_POOLS
    tool_steps: int = MAX_STEPS_PER_TURN
    compaction_threshold: float | None = None
    review_retry_s: float = RETRY_DELAY_S  # a reviewer's wait after a failed review


class AgentHostCore(TurnRuns):
    """Holds agents by uuid; one lock per agent keeps its turns strictly one at a time."""

    def __init__(self, host_id: str, parts: HostParts) -> None:
        super().__init__()
        self.host_id = host_id
        self.parts = parts
        self.tracing = parts.tracing
        self.agents: dict[str, Agent] = {}
        self.reviewers: dict[str, Reviewer] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        # Each agent's own workspace (None: the host's) and worktree, if it has them.
        self._workspaces: dict[str, tuple[str | None, Worktree | None]] = {}
        self._fleet = parts.fleet if parts.fleet is not None and parts.fleet.providers else None
        self.pools = IdlePools(self._idle_agent, parts.idle_release_s, parts.idle_pools)
        self.jobs = ProviderJobs(parts.make_provider, parts.make_tools)

    async def ping(self) -> dict[str, Any]:
        return {"host": self.host_id, "pid": os.getpid(), "agents": len(self.agents)}

    async def flush_telemetry(self) -> None:
        """Export the spans this host has ended (before Grove stops it)."""
        await asyncio.to_thread(self.tracing.flush)

    def activate(self, activation: Activation, prefix: Sequence[Message] = ()) -> None:
        """Build the agent from its record and conversation (replacing a stale copy).

        `prefix` is an inherited conversation already converted once for many agents."""
        uuid, workspace = activation.uuid, activation.workspace
        tools = (
            self.parts.make_tools(uuid, activation.tools, workspace)
            if self.parts.make_tools and activation.tools and _present(workspace)
            else {}
        )
        history = to_messages(activation.history, fork_points=True)
        last = activation.history[-1] if activation.history else None
        if last is not None and getattr(last, "agent_uuid", activation.uuid) != activation.uuid:
            add_part(history, fork_point(last))  # a child yet to speak: all it has is inherited
        self._workspaces[uuid] = (workspace, activation.worktree)
        self.agents[activation.uuid] = Agent(
            activation.uuid,
            activation.choice,
            join_messages(prefix, history),
            self.parts.make_provider,
            system=activation.system,
            tools=tools,
            max_steps=self.parts.tool_steps,
            recover=self.parts.recover,
            compaction_threshold=self.parts.compaction_threshold,
            budget=self.parts.budget if activation.budgeted else None,
            fleet=self._fleet,
            cache=self.parts.cache,
            tracing=self.tracing,
            batch=self.parts.batch,
        )
        self._locks.setdefault(activation.uuid, asyncio.Lock())

    async def add_reviewer(self, spec: ReviewerSpec) -> None:
        """Start (or restart) a reviewer with its own agent, provider and tools; its reports
        go to `reviewed`."""
        if self.parts.reviewer_tools is None or self.parts.reviewed is None:
            raise RuntimeError(f"host {self.host_id} runs no reviewers")
        self.pools.keep_releasing()
        tools = self.parts.reviewer_tools(spec)
        agent = Agent(
            spec.uuid,
            spec.choice,
            [],
            self.parts.make_provider,
            system=spec.system,
            tools=tools,
            budget=self.parts.budget if spec.budgeted else None,
            fleet=self._fleet,
            cache=self.parts.cache,
        )
        self.reviewers[spec.uuid] = Reviewer(
            spec.uuid,
            agent,
            self.parts.reviewed,
            context_window=spec.context_window,
            retry_delay_s=self.parts.review_retry_s,
        )

    async def review(self, uuid: str, delta: str) -> tuple[int, int]:
        """Queue a delta for a reviewer; its (version, backlog) after that."""
        return self.reviewers[uuid].update(delta)

    async def reset_reviewer(self, uuid: str, primer: str) -> tuple[int, int]:
        return self.reviewers[uuid].reset(primer)

    async def reviewer_view(self, uuid: str, what: str) -> Any:
        """`status` (a dict), `dump` or `dump raw` (text)."""
        reviewer = self.reviewers[uuid]
        if what == "status":
            return reviewer.status()
        return reviewer.dump(raw=what == "dump raw")

    async def drop_reviewer(self, uuid: str) -> None:
        reviewer = self.reviewers.pop(uuid, None)
        if reviewer is not None:
            reviewer.reset("")
            if reviewer.agent.has_provider:
                await reviewer.agent.provider.aclose()

    async def prepare(
        self,
        uuid: str,
        choice: ModelChoice,
        activation: Activation | None = None,
        prefix: Sequence[Message] = (),
    ) -> None:
        """Hold the agent on `choice` with its provider built and its credentials resolved;
        MissingCredentialsError when there is no key (nothing is sent). `prefix`: as
        `activate`'s."""
        self.pools.keep_releasing()
        if activation is not None:
            self.activate(activation, prefix)
        agent = self.agents[uuid]
        if agent.choice != choice:
            await agent.switch_model(choice)
        resolve = getattr(agent.provider, "endpoint", None)
        if resolve is not None:
            resolve()

    async def start_turn(self, ticket: Ticket, activation: Activation | None = None) -> None:
        self.pools.keep_releasing()
        if activation is not None or ticket.uuid not in self.agents:
            if activation is None:
                raise KeyError(f"agent {ticket.uuid} is not active on host {self.host_id}")
            self.activate(activation)
        self._start(ticket)

    async def prepare_many(
        self,
        items: Sequence[tuple[str, ModelChoice, Activation | None]],
        prefix: Sequence[Entry] = (),
    ) -> list[Exception | None]:
        """`prepare` for many agents: each one's error, or None. The agents built here
        inherit `prefix`, converted once, as `start_many`'s do (their own history follows)."""
        shared = inherited(prefix)
        errors: list[Exception | None] = []
        for uuid, choice, activation in items:
            try:
                await self.prepare(uuid, choice, activation, shared)
            except Exception as exc:  # that agent's error, for its own caller
                errors.append(exc)
            else:
                errors.append(None)
        return errors

    async def start_turns(self, tickets: Sequence[Ticket]) -> list[Exception | None]:
        """Start the turns of agents held here already: each one's error, or None."""
        errors: list[Exception | None] = []
        for ticket in tickets:
            try:
                await self.start_turn(ticket)
            except Exception as exc:
                errors.append(exc)
            else:
                errors.append(None)
        return errors

    async def start_many(
        self,
        items: Sequence[tuple[Ticket, Activation]],
        prefix: Sequence[Entry],
        cached_content: str | None = None,
    ) -> None:
        """Activate and start many forked agents that share one inherited `prefix`, which
        ends at their fork point (`cached_content`: a provider-side copy of it, by name)."""
        self.pools.keep_releasing()
        shared = inherited(prefix, cached_content)
        for ticket, activation in items:
            self.activate(activation, shared)
            self._start(ticket)

    def _start(self, ticket: Ticket) -> None:
        run = TurnRun(ticket=ticket)
        self.runs[ticket.ticket_id] = run
        run.task = asyncio.create_task(self._run(run), name=f"turn-{ticket.ticket_id}")

    async def _run(self, run: TurnRun) -> None:
        uuid = run.ticket.uuid
        async with self._locks[uuid]:
            agent = self.agents[uuid]
            if agent.choice != run.ticket.choice:
                await agent.switch_model(run.ticket.choice)
            billed = None
            if self.parts.billed is not None:
                billed = functools.partial(self.parts.billed, run.ticket.ticket_id, uuid)
            steps = (
                None
                if self.parts.steps is None
                else functools.partial(self.parts.steps, run.ticket)
            )
            workspace, worktree = self._workspaces.get(uuid, (None, None))
            if _present(workspace):
                result = await agent.run_turn(
                    run.ticket.user,
                    run.push,
                    billed,
                    output=run.ticket.output,
                    steps=steps,
                    trace=run.ticket.trace,
                )
                if worktree is not None and not result.cancelled:
                    result.worktree = await _settled(worktree, uuid)
            else:  # a worktree removed, or a repository this node does not share
                assert workspace is not None
                repo = worktree.repo if worktree else None
                result = TurnResult(error=missing_text(workspace, repo))
            self.pools.used(uuid)
        self.ended(run, result)
        await self.parts.report(run.ticket, result)
        self.forget_later(run.ticket.ticket_id)
        await self.pools.release_least_recent()

    async def switch_model(self, uuid: str, choice: ModelChoice) -> None:
        agent = self.agents.get(uuid)
        if agent is not None:
            await agent.switch_model(choice)

    async def steer(self, uuid: str, entry: NewEntry) -> bool:
        agent = self.agents.get(uuid)
        if agent is None:
            return False
        agent.steer(entry)
        return True

    async def steer_many(self, entries: Sequence[tuple[str, NewEntry]]) -> int:
        """`steer` for many `(uuid, entry)` pairs; how many reached an agent held here."""
        return sum([await self.steer(uuid, entry) for uuid, entry in entries])

    async def drop(self, uuid: str) -> None:
        """Stop holding an agent (killed or reaped): cancel its turn, close its provider."""
        await self.cancel(uuid)
        agent = self.agents.pop(uuid, None)
        self._locks.pop(uuid, None)
        self._workspaces.pop(uuid, None)
        self.pools.forget(uuid)
        if agent is not None and agent.has_provider:
            await agent.provider.aclose()

    def _idle_agent(self, uuid: str) -> Agent | None:
        """The agent when it is held here and no turn of it runs now."""
        agent, lock = self.agents.get(uuid), self._locks.get(uuid)
        return None if agent is None or lock is None or lock.locked() else agent

    async def create_cache(
        self, activation: Activation, prefix: Sequence[Entry], ttl_s: int
    ) -> CachedContent:
        return await self.jobs.create_cache(activation, prefix, ttl_s)

    async def drop_cache(self, choice: ModelChoice, name: str) -> None:
        await self.jobs.drop_cache(choice, name)

    async def complete(
        self, choice: ModelChoice, system: str, prompt: str, max_tokens: int
    ) -> AssistantTurn:
        return await self.jobs.complete(choice, system, prompt, max_tokens)

    async def provider_identity(self, uuid: str) -> dict[str, Any]:
        """For tests and diagnostics: the host's process, and which provider instance and
        client an agent holds."""
        agent = self.agents[uuid]
        if not agent.has_provider:
            return {"pid": os.getpid(), "provider": None, "client": None}
        provider = agent.provider
        client = getattr(provider, "_client", None)
        return {
            "pid": os.getpid(),
            "provider": getattr(provider, "instance", id(provider)),
            "client": None if client is None else id(client),
        }


def inherited(prefix: Sequence[Entry], cached_content: str | None = None) -> list[Message]:
    """A conversation forked agents inherit, converted once for all of them, its end marked
    as their fork point (`cached_content`: a provider-side copy of it, by name)."""
    shared = to_messages(prefix, fork_points=True)
    if prefix:
        add_part(shared, fork_point(prefix[-1], cached_content))
    return shared


def _present(workspace: str | None) -> bool:
    """Whether an agent's own workspace is here (the host's always is)."""
    return workspace is None or os.path.isdir(workspace)


async def _settled(worktree: Worktree, uuid: str) -> dict[str, str]:
    """Commit the agent's work to its branch; what the turn's result says of it."""
    try:
        return await settle(worktree, uuid)
    except WorktreeError as exc:
        return {"branch": worktree.branch, "diff_stat": f"not committed: {exc}"}
