"""`AgentHost`: many agents in one process, activated lazily, each turn streamed in chunks.

Plain asyncio logic; actors/remote.py makes it a Ray actor. A turn runs as the host's own
task, so a caller that stops reading does not stop the turn.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from grove.actors.advisor import RETRY_DELAY_S, Reviewer
from grove.actors.advisor_messages import Report, ReviewerSpec
from grove.actors.agent import (
    MAX_STEPS_PER_TURN,
    Agent,
    FleetPort,
    ModelChoice,
    NewEntry,
    Recover,
    Tool,
    ToolActivity,
    TurnResult,
)
from grove.actors.budget_guard import BudgetPort
from grove.actors.output import OutputType
from grove.actors.telemetry import NO_TRACING, TraceParent, Tracing
from grove.actors.tools.grant import ToolGrant
from grove.actors.tools.grove_git import WorktreeError
from grove.actors.tools.worktrees import Worktree, missing_text, settle
from grove.actors.transcript import Entry, add_part, fork_point, join_messages, to_messages
from grove.providers.base import AssistantTurn, CachePolicy, Message, Provider, Request
from grove.providers.errors import ProviderError
from grove.providers.google.cache import CachedContent, create_cached_content, delete_cached_content
from grove.providers.http import HTTPProvider
from grove.providers.stream_events import (
    CONTENT_EVENT_KINDS,
    ProviderWarning,
    Retrying,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
)

# Tells the supervisor what a request of a turn may be billed at most before it is sent, and
# what it was billed as soon as it ends: (ticket id, agent, the data its reply is stored with,
# without its parts; an estimate's is marked `estimated`, actors/estimates.py).
Billed = Callable[[str, str, dict[str, Any]], Awaitable[None]]
# Stores finished steps of a turn as they end (actors/steps.py StoreSteps, for this ticket).
StepStore = Callable[["Ticket", list[tuple[int, NewEntry]]], Awaitable[list[int] | None]]

# Deltas that arrive within this window travel to a caller as one chunk.
COALESCE_WINDOW_S = 0.03
DEFAULT_IDLE_RELEASE_S = 120.0
# Agents of a host that may keep an idle connection pool open; beyond it, the least recently
# used let go of theirs (each holds a socket here and one at the provider).
DEFAULT_IDLE_POOLS = 512
# A finished turn's result stays readable this long after it was reported.
RESULT_GRACE_S = 300.0


@dataclass(frozen=True, kw_only=True, slots=True)
class Activation:
    """What a host needs to build an agent it does not hold yet."""

    uuid: str
    choice: ModelChoice | None
    history: list[Entry]
    system: str | None = None
    tools: ToolGrant = field(default_factory=ToolGrant)
    budgeted: bool = False  # its tree has a budget: each request is checked first
    workspace: str | None = None  # the root of its workspace tools (None: the host's)
    worktree: Worktree | None = None  # its own worktree, committed to after each turn


@dataclass(frozen=True, kw_only=True, slots=True)
class Ticket:
    """One turn: which agent, what it is told, under which model."""

    ticket_id: str
    uuid: str
    user: NewEntry | None
    choice: ModelChoice
    output: OutputType | None = None  # a typed answer: its schema, checked here
    trace: TraceParent | None = None  # where the turn's span hangs in its tree's trace


@dataclass(slots=True)
class TurnRun:
    """A turn in progress: deltas waiting for a reader, and the result once done."""

    ticket: Ticket
    # (kind, fragments) runs, joined when read: no copy per delta of a reply nobody reads yet.
    pending: list[tuple[str, list[str]]] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    result: TurnResult | None = None
    task: asyncio.Task[None] | None = None
    # Readers besides the turn's caller (a dashboard): each gets every delta; None ends it.
    watchers: list[asyncio.Queue[tuple[str, str] | None]] = field(default_factory=list)
    # Every delta so far (the fragments pending holds too, not copies): what a watcher who
    # comes in mid-turn is shown first.
    so_far: list[tuple[str, str]] = field(default_factory=list)
    # Set when the turn's first reply began to stream (or an attempt failed, or the turn
    # ended): what a warm-up before fan-out waits for (supervisor/warmup.py).
    started: asyncio.Event = field(default_factory=asyncio.Event)

    def push(self, event: StreamEvent | ToolActivity) -> None:
        if event.kind in CONTENT_EVENT_KINDS or event.kind == "retrying":
            self.started.set()
        match event:
            case TextDelta(text=text):
                self._add("text", text)
            case ThinkingDelta(text=text):
                self._add("thinking", text)
            case Retrying(attempt=attempt, delay_s=delay, reason=reason):
                self._add(
                    "notice", f"attempt {attempt} failed ({reason}); retrying in {delay:.1f}s"
                )
            case ProviderWarning(text=text):
                self._add("notice", text)
            case ToolActivity(kind=kind, text=text):
                self._add(kind, text)
            case _:
                return
        self.changed.set()

    def announce(self, kind: str, text: str) -> None:
        self._add(kind, text)
        self.changed.set()

    def _add(self, kind: str, text: str) -> None:
        self.so_far.append((kind, text))
        for queue in self.watchers:
            queue.put_nowait((kind, text))
        if self.pending and self.pending[-1][0] == kind and kind in ("text", "thinking"):
            self.pending[-1][1].append(text)
        else:
            self.pending.append((kind, [text]))

    def take(self) -> list[tuple[str, str]]:
        chunk = [(kind, "".join(fragments)) for kind, fragments in self.pending]
        self.pending = []
        self.changed.clear()
        return chunk


ToolsFactory = Callable[[str, ToolGrant, str | None], dict[str, Tool]]
ReportResult = Callable[[Ticket, TurnResult], Awaitable[None]]
# A reviewer's tools (the read-only workspace tools and `advise`, say), built for its spec.
ReviewerTools = Callable[[ReviewerSpec], dict[str, Tool]]


class AgentHostCore:
    """Holds agents by uuid; one lock per agent keeps its turns strictly one at a time."""

    def __init__(
        self,
        host_id: str,
        make_provider: Callable[[ModelChoice], Provider],
        report: ReportResult,
        *,
        make_tools: ToolsFactory | None = None,
        idle_release_s: float = DEFAULT_IDLE_RELEASE_S,
        idle_pools: int = DEFAULT_IDLE_POOLS,
        tool_steps: int = MAX_STEPS_PER_TURN,
        recover: Recover | None = None,
        compaction_threshold: float | None = None,
        budget: BudgetPort | None = None,
        fleet: FleetPort | None = None,
        billed: Billed | None = None,
        cache: CachePolicy | None = None,
        steps: StepStore | None = None,
        tracing: Tracing = NO_TRACING,
        review_retry_s: float = RETRY_DELAY_S,
        reviewer_tools: ReviewerTools | None = None,
        reviewed: Report | None = None,
    ) -> None:
        self.host_id = host_id
        self._reviewer_tools = reviewer_tools
        self._reviewed = reviewed
        self._review_retry_s = review_retry_s  # a reviewer's wait after a failed review
        self._steps = steps
        self.tracing = tracing  # the spans of its agents' turns
        self.cache = cache  # `[cache]` of every agent here (None: caching off)
        self._billed = billed
        self.tool_steps = tool_steps
        self.agents: dict[str, Agent] = {}
        self.runs: dict[str, TurnRun] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._last_used: dict[str, float] = {}  # agents holding a pool, least recent first
        self._make_provider = make_provider
        self._make_tools = make_tools
        self._recover = recover
        self._compaction_threshold = compaction_threshold
        self._budget = budget
        self._fleet = fleet if fleet is not None and fleet.providers else None
        self._report = report
        self.idle_release_s = idle_release_s
        self.idle_pools = idle_pools
        self.reviewers: dict[str, Reviewer] = {}
        # Each agent's own workspace (None: the host's) and worktree, if it has them.
        self._workspaces: dict[str, tuple[str | None, Worktree | None]] = {}
        self._janitor: asyncio.Task[None] | None = None

    def _keep_releasing(self) -> None:
        """Start the idle-release loop on the running event loop, once (a Ray actor's loop is
        not there yet when it is built)."""
        if self._janitor is None:
            self._janitor = asyncio.get_running_loop().create_task(self._release_idle_forever())

    async def _release_idle_forever(self) -> None:
        interval = max(self.idle_release_s / 4, 0.05)
        while True:
            await asyncio.sleep(interval)
            await self.release_idle()

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
            self._make_tools(uuid, activation.tools, workspace)
            if self._make_tools and activation.tools and _present(workspace)
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
            self._make_provider,
            system=activation.system,
            tools=tools,
            max_steps=self.tool_steps,
            recover=self._recover,
            compaction_threshold=self._compaction_threshold,
            budget=self._budget if activation.budgeted else None,
            fleet=self._fleet,
            cache=self.cache,
            tracing=self.tracing,
        )
        self._locks.setdefault(activation.uuid, asyncio.Lock())

    async def add_reviewer(self, spec: ReviewerSpec) -> None:
        """Start (or restart) a reviewer with its own agent, provider and tools; its reports
        go to `reviewed`."""
        if self._reviewer_tools is None or self._reviewed is None:
            raise RuntimeError(f"host {self.host_id} runs no reviewers")
        self._keep_releasing()
        tools = self._reviewer_tools(spec)
        agent = Agent(
            spec.uuid,
            spec.choice,
            [],
            self._make_provider,
            system=spec.system,
            tools=tools,
            budget=self._budget if spec.budgeted else None,
            fleet=self._fleet,
            cache=self.cache,
        )
        self.reviewers[spec.uuid] = Reviewer(
            spec.uuid,
            agent,
            self._reviewed,
            context_window=spec.context_window,
            retry_delay_s=self._review_retry_s,
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

    def holds(self, uuid: str) -> bool:
        return uuid in self.agents

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
        self._keep_releasing()
        if activation is not None:
            self.activate(activation, prefix)
        agent = self.agents[uuid]
        if agent.choice != choice:
            await agent.switch_model(choice)
        resolve = getattr(agent.provider, "endpoint", None)
        if resolve is not None:
            resolve()

    async def start_turn(self, ticket: Ticket, activation: Activation | None = None) -> None:
        self._keep_releasing()
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
        self._keep_releasing()
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
            if self._billed is not None:
                billed = functools.partial(self._billed, run.ticket.ticket_id, uuid)
            steps = None if self._steps is None else functools.partial(self._steps, run.ticket)
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
            self._last_used.pop(uuid, None)
            self._last_used[uuid] = time.monotonic()
        run.result = result
        run.changed.set()
        run.started.set()
        for queue in run.watchers:
            queue.put_nowait(None)
        await self._report(run.ticket, result)
        asyncio.get_running_loop().call_later(RESULT_GRACE_S, self.forget, run.ticket.ticket_id)
        await self.release_least_recent()

    async def stream(self, ticket_id: str) -> AsyncIterator[list[tuple[str, str]]]:
        """Chunks of `(kind, text)` deltas, coalesced over a short window, until the end."""
        run = self.runs[ticket_id]
        while True:
            await run.changed.wait()
            if run.result is None:
                await asyncio.sleep(COALESCE_WINDOW_S)
            # Whether it had ended before this take: deltas pushed while the chunk is on its
            # way (the yield lets the turn run on) and then its end come in the next take.
            ended = run.result is not None
            chunk = run.take()
            if chunk:
                yield chunk
            if ended:
                return

    async def watch(
        self, uuid: str, ticket_id: str | None = None
    ) -> AsyncIterator[list[tuple[str, str]]]:
        """The deltas of the agent's turn in progress, those so far first, to its end, for a
        reader that did not start it (nothing when no turn is in progress). With `ticket_id`:
        that turn's, even when it has ended since (while its result is kept), so a reader who
        comes late to a short turn still reads all of it."""
        if ticket_id is None:
            running = (r for r in self.runs.values() if r.ticket.uuid == uuid and r.result is None)
            run = next(running, None)
        else:
            run = self.runs.get(ticket_id)
        if run is None or run.ticket.uuid != uuid:
            return
        queue: asyncio.Queue[tuple[str, str] | None] = asyncio.Queue()
        for delta in run.so_far:
            queue.put_nowait(delta)
        if run.result is not None:
            queue.put_nowait(None)
        else:
            run.watchers.append(queue)
        try:
            ended = False
            while not ended:
                item = await queue.get()
                chunk: list[tuple[str, str]] = []
                while True:  # what has come since, as one chunk
                    if item is None:
                        ended = True
                        break
                    chunk.append(item)
                    if queue.empty():
                        break
                    item = queue.get_nowait()
                if chunk:
                    yield chunk
        finally:
            if queue in run.watchers:
                run.watchers.remove(queue)

    async def wait_started(self, ticket_id: str, timeout_s: float) -> bool:
        """Wait until the turn's first reply has begun (its first content arrived), an attempt
        of it failed, or it ended; False when `timeout_s` passed first (or it is unknown)."""
        run = self.runs.get(ticket_id)
        if run is None:
            return False
        try:
            await asyncio.wait_for(run.started.wait(), timeout_s)
        except TimeoutError:
            return False
        return True

    async def result(self, ticket_id: str) -> TurnResult:
        run = self.runs[ticket_id]
        if run.task is not None:
            await asyncio.shield(run.task)
        assert run.result is not None
        return run.result

    async def results(
        self, ticket_ids: Sequence[str], timeout_s: float
    ) -> dict[str, TurnResult | None]:
        """Of the turns `ticket_ids`, those that ended, once at least one has ({} after
        `timeout_s`): many callers' `result` waits in one call. None for a turn to ask
        `result` about alone (unknown here, or ended without a result)."""
        runs = {ticket: self.runs.get(ticket) for ticket in ticket_ids}
        running = [
            run.task
            for run in runs.values()
            if run is not None and run.task is not None and not run.task.done()
        ]
        if running and len(running) == len(runs):
            await asyncio.wait(running, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
        return {
            ticket: _ended_result(run)
            for ticket, run in runs.items()
            if run is None or run.task is None or run.task.done()
        }

    def forget(self, ticket_id: str) -> None:
        self.runs.pop(ticket_id, None)

    async def announce(self, uuid: str, kind: str, text: str) -> bool:
        """Put a line of `kind` (an approval request, say) into the agent's running turn's
        stream; False when it runs none."""
        for run in self.runs.values():
            if run.ticket.uuid == uuid and run.result is None:
                run.announce(kind, text)
                return True
        return False

    async def cancel(self, uuid: str) -> bool:
        """Cancel the agent's running turn, if any; its partial answer is not kept."""
        cancelled = False
        for run in self.runs.values():
            if run.ticket.uuid == uuid and run.result is None and run.task is not None:
                run.task.cancel()
                cancelled = True
        return cancelled

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
        self._last_used.pop(uuid, None)
        if agent is not None and agent.has_provider:
            await agent.provider.aclose()

    async def release_idle(self, now: float | None = None) -> int:
        """Release connection pools of agents idle longer than `idle_release_s`."""
        now = time.monotonic() if now is None else now
        released = 0
        for uuid, last in list(self._last_used.items()):
            if now - last >= self.idle_release_s:
                released += await self._release_pool(uuid)
        return released

    async def release_least_recent(self) -> int:
        """Release the pools of the least recently used idle agents beyond `idle_pools`."""
        released, beyond = 0, len(self._last_used) - self.idle_pools
        for uuid in list(itertools.islice(self._last_used, max(0, beyond))):
            released += await self._release_pool(uuid)
        return released

    async def _release_pool(self, uuid: str) -> bool:
        """Close an agent's pool unless a turn of its runs now (or it is no longer held)."""
        agent, lock = self.agents.get(uuid), self._locks.get(uuid)
        if agent is None or lock is None or lock.locked() or uuid not in self._last_used:
            return False
        del self._last_used[uuid]
        await agent.release_connections()
        return True

    async def create_cache(
        self, activation: Activation, prefix: Sequence[Entry], ttl_s: int
    ) -> CachedContent:
        """A provider-side copy (Gemini `cachedContents`) of what `activation`'s agent sends
        before its own first message: its system prompt, its tools and `prefix`."""
        assert activation.choice is not None, "a cache is made for an agent with a model"
        tools = (
            self._make_tools(activation.uuid, activation.tools, activation.workspace)
            if self._make_tools and activation.tools
            else {}
        )
        request = Request(
            model=activation.choice.model,
            messages=tuple(to_messages(prefix)),
            system=activation.system,
            tools=tuple(tool.spec for tool in tools.values()),
        )
        provider = self._make_provider(activation.choice)
        try:
            if not isinstance(provider, HTTPProvider):
                raise ProviderError("explicit caches are made over HTTP")
            return await create_cached_content(provider, request, ttl_s)
        except ProviderError as exc:  # as its text: the HTTP error's own fields do not pickle
            raise ProviderError(str(exc), provider=exc.provider) from None
        finally:
            await provider.aclose()

    async def drop_cache(self, choice: ModelChoice, name: str) -> None:
        """Delete a provider-side cache `create_cache` made."""
        provider = self._make_provider(choice)
        try:
            if isinstance(provider, HTTPProvider):
                await delete_cached_content(provider, name)
        finally:
            await provider.aclose()

    async def complete(
        self, choice: ModelChoice, system: str, prompt: str, max_tokens: int
    ) -> AssistantTurn:
        """One request outside any agent's conversation (a compaction summary), on a provider
        of its own, closed afterwards."""
        provider = self._make_provider(choice)
        try:
            request = Request(
                model=choice.model,
                messages=(Message.user(prompt),),
                system=system,
                thinking=choice.thinking,
                max_tokens=max_tokens,
            )
            return await provider.complete(request)
        finally:
            await provider.aclose()

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


def _ended_result(run: TurnRun | None) -> TurnResult | None:
    """An ended turn's result as `result` would give it; None when that would raise."""
    if run is None or (run.task is not None and (run.task.cancelled() or run.task.exception())):
        return None
    return run.result
