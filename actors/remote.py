"""The Ray face of actors/: `AgentHost` as an async Ray actor. All Ray calls of actors/ are here.

It reports finished turns to whatever `reporter` actor it was given (the supervisor).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import ray

from grove.actors.advisor import RETRY_DELAY_S, ReviewerSpec, ReviewReport, advise_tool
from grove.actors.agent import (
    MAX_STEPS_PER_TURN,
    ModelChoice,
    NewEntry,
    ToolError,
    TurnResult,
)
from grove.actors.budget_guard import BudgetStop
from grove.actors.coalesce import Coalescer
from grove.actors.collector import tune_collector
from grove.actors.host import DEFAULT_IDLE_POOLS, Activation, AgentHostCore, Ticket
from grove.actors.reports import ReportBatcher
from grove.actors.telemetry import TelemetrySettings, Tracing, start_tracing
from grove.actors.tools.fanout import WAIT_CAP_S
from grove.actors.tools.kit import ToolKit
from grove.actors.tools.mcp import McpServerConfig
from grove.actors.tools.readonly import readonly_tools
from grove.actors.tools.sandbox import SandboxPolicy
from grove.providers.base import AssistantTurn, CachePolicy, Provider, RateLimitLeft
from grove.providers.catalog import set_prices
from grove.providers.factory import create_provider
from grove.providers.google.cache import CachedContent
from grove.providers.http import Endpoint
from grove.providers.retry import RetryPolicy

REPORT_TIMEOUT_S = 30.0
TOOL_CALL_TIMEOUT_S = 60.0
# How long a call waits for a person to answer "may this tool run?" before it is refused.
APPROVAL_TIMEOUT_S = 600.0


@dataclass(frozen=True, kw_only=True, slots=True)
class HostSettings:
    """Where each provider is reached from a host. `simulator` fixes URL and key for all."""

    base_urls: dict[str, str | None] = field(default_factory=dict)
    openai_api: str = "responses"
    simulator: Endpoint | None = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)  # `[providers.retry]`
    idle_release_s: float = 120.0
    idle_pools: int = DEFAULT_IDLE_POOLS  # `[hosts] idle_pools`
    tool_steps: int = MAX_STEPS_PER_TURN
    durable_steps: bool = True  # `[hosts] durable_steps`: each finished step stored as it ends
    workspace: str = "."  # the root of the workspace tools: the caller's working directory
    sandbox: SandboxPolicy = field(default_factory=SandboxPolicy)  # `[tools.sandbox]`
    mcp_servers: dict[str, McpServerConfig] = field(default_factory=dict)
    # `[compaction] threshold` when automatic compaction is on: a turn ending past this share
    # of its model's window asks the supervisor to compact before it ends.
    compaction_threshold: float | None = None
    # Providers whose requests wait for the supervisor's fleet limits first.
    limited_providers: frozenset[str] = frozenset()
    prices: dict[str, list[float]] = field(default_factory=dict)  # `[models] prices`
    cache: CachePolicy | None = field(default_factory=CachePolicy)  # `[cache]`; None: off
    telemetry: TelemetrySettings | None = None  # where spans go (None: tracing off)
    review_retry_s: float = RETRY_DELAY_S  # `[advisor] retry_delay_s`


def provider_factory(settings: HostSettings) -> Any:
    def make(choice: ModelChoice) -> Provider:
        return create_provider(
            choice.provider,
            configured_base_url=settings.base_urls.get(choice.provider),
            endpoint=settings.simulator,
            openai_api="chat" if settings.openai_api == "chat" else "responses",
            retry=settings.retry,
        )

    return make


def _ray_files() -> list[str]:
    """Ray's directory on this node (its sockets, logs and session files): hidden from the
    processes tools start, like the secrets (it is under /tmp, which they get their own of,
    unless Ray was told otherwise)."""
    node = getattr(ray._private.worker.global_worker, "node", None)
    return [node.get_temp_dir_path()] if node is not None else []


class ToolRefused(ToolError):
    """The supervisor refused a tool call; the text says why (the model is told, as is)."""


class SupervisorFleetPort:
    """The fleet's rate limits, kept by the supervisor, for the providers that have them; the
    host's agents ask together (one call per batch)."""

    def __init__(self, supervisor: Any, providers: frozenset[str]) -> None:
        self._supervisor = supervisor
        self.providers = providers
        self._acquire = Coalescer(self._acquire_many, "fleet-acquire")
        self._release = Coalescer(self._release_many, "fleet-release")

    async def _acquire_many(self, requests: list[tuple[str, int]]) -> list[float]:
        waits: list[float] = await self._supervisor.fleet_acquire_many.remote(requests)
        return waits

    async def _release_many(self, ended: list[tuple[str, RateLimitLeft | None]]) -> list[None]:
        done: list[None] = await asyncio.wait_for(
            self._supervisor.fleet_release_many.remote(ended), TOOL_CALL_TIMEOUT_S
        )
        return done

    async def acquire(self, provider: str, tokens: int) -> None:
        """Returns when the request may go; until then, asks again when told to."""
        while True:
            wait = await self._acquire.call((provider, tokens))
            if not wait:
                return
            await asyncio.sleep(wait)

    async def release(self, provider: str, left: RateLimitLeft | None) -> None:
        await self._release.call((provider, left))

    async def cool_down(self, uuid: str, provider: str, seconds: float) -> None:
        await self._supervisor.fleet_cool_down.remote(uuid, provider, seconds)


class SupervisorBudgetPort:
    """An agent's budget, held and settled by the supervisor around each request; the host's
    agents ask together (one call per batch)."""

    def __init__(self, supervisor: Any) -> None:
        self._supervisor = supervisor
        self._reserve = Coalescer(self._reserve_many, "budget-reserve")
        self._settle = Coalescer(self._settle_many, "budget-settle")

    async def _reserve_many(
        self, requests: list[tuple[str, str, int, int | None]]
    ) -> list[tuple[str, Any]]:
        answers: list[tuple[str, Any]] = await asyncio.wait_for(
            self._supervisor.budget_reserve_many.remote(requests), TOOL_CALL_TIMEOUT_S
        )
        return answers

    async def _settle_many(self, ended: list[tuple[str, Any, int, float]]) -> list[None]:
        done: list[None] = await asyncio.wait_for(
            self._supervisor.budget_settle_many.remote(ended), TOOL_CALL_TIMEOUT_S
        )
        return done

    async def reserve(self, uuid: str, model: str, tokens: int, max_tokens: int | None) -> Any:
        """The hold; while requests in flight hold the room, ask again as they settle."""
        while True:
            answer, detail = await self._reserve.call((uuid, model, tokens, max_tokens))
            if answer == "held":
                return detail
            if answer == "refused":
                raise BudgetStop(detail)
            await asyncio.sleep(detail)

    async def extend(self, uuid: str, model: str, hold: Any, more: int) -> Any:
        ok, text, larger = await asyncio.wait_for(
            self._supervisor.budget_extend.remote(uuid, model, hold, more), TOOL_CALL_TIMEOUT_S
        )
        if not ok:
            raise BudgetStop(text)
        return larger

    async def settle(self, uuid: str, hold: Any, tokens: int, cost_usd: float) -> None:
        await self._settle.call((uuid, hold, tokens, cost_usd))


class SupervisorBillingPort:
    """What each request of a turn may be billed at most, told to the supervisor before it is
    sent, and what it was billed, told as it ends (the host's agents together, one call per
    batch)."""

    def __init__(self, supervisor: Any) -> None:
        self._supervisor = supervisor
        self._told = Coalescer(self._tell_many, "billed")

    async def _tell_many(self, requests: list[tuple[str, str, dict[str, Any]]]) -> list[None]:
        done: list[None] = await asyncio.wait_for(
            self._supervisor.billed_many.remote(requests), TOOL_CALL_TIMEOUT_S
        )
        return done

    async def tell(self, ticket_id: str, uuid: str, data: dict[str, Any]) -> None:
        with contextlib.suppress(TimeoutError, ray.exceptions.RayError):  # the report still goes
            await self._told.call((ticket_id, uuid, data))


class SupervisorStepPort:
    """Finished steps of turns, stored by the supervisor as they end (the host's agents
    together, one call per batch)."""

    def __init__(self, supervisor: Any) -> None:
        self._supervisor = supervisor
        self._stored = Coalescer(self._store_many, "steps")

    async def _store_many(self, steps: list[tuple[Ticket, int, NewEntry]]) -> list[int | None]:
        ids: list[int | None] = await asyncio.wait_for(
            self._supervisor.store_steps.remote(steps), REPORT_TIMEOUT_S
        )
        return ids

    async def store(self, ticket: Ticket, entries: list[tuple[int, NewEntry]]) -> list[int] | None:
        """Each entry's message id; None when the supervisor refused the turn's steps, or is
        gone (stopped with its Grove, or restarting): this run of the turn stops there, and
        a run that resumes it goes on from its stored steps (a call whose reply could not be
        stored never runs)."""
        try:
            ids = await asyncio.gather(
                *(self._stored.call((ticket, index, entry)) for index, entry in entries)
            )
        except ray.exceptions.RayActorError:
            return None
        if any(message_id is None for message_id in ids):
            return None
        return [message_id for message_id in ids if message_id is not None]


class SupervisorToolPort:
    """Forwards fan-out tool calls to the supervisor actor, each with a timeout and the
    trace context of the call's span (a forked child's turns hang under it)."""

    def __init__(self, supervisor: Any, tracing: Tracing) -> None:
        self._supervisor = supervisor
        self._tracing = tracing

    async def call(self, agent: str, tool: str, arguments: dict[str, Any]) -> str:
        timeout = TOOL_CALL_TIMEOUT_S
        asked = arguments.get("timeout") if tool == "wait" else None
        if isinstance(asked, int | float) and math.isfinite(asked):
            timeout += min(max(float(asked), 0.0), WAIT_CAP_S)  # the supervisor refuses more
        trace = self._tracing.current()
        ok, text = await asyncio.wait_for(
            self._supervisor.tool_call.remote(agent, tool, arguments, trace), timeout
        )
        if not ok:
            raise ToolRefused(text)
        return str(text)

    async def source(self, agent: str, digest: str) -> bytes:
        payload: bytes = await asyncio.wait_for(
            self._supervisor.tool_source.remote(agent, digest), TOOL_CALL_TIMEOUT_S
        )
        return payload

    async def approve(self, agent: str, tool: str, arguments: dict[str, Any]) -> None:
        ok, text = await asyncio.wait_for(
            self._supervisor.approve.remote(agent, tool, arguments), APPROVAL_TIMEOUT_S
        )
        if not ok:
            raise ToolError(text)


@ray.remote
class AgentHost:
    """Hosts many agents; a few of these run per node."""

    def __init__(self, host_id: str, settings: HostSettings, reporter: Any) -> None:
        tune_collector()
        set_prices(settings.prices)
        self._reporter = reporter
        sandbox = replace(settings.sandbox, hidden=(*settings.sandbox.hidden, *_ray_files()))
        self.tracing = start_tracing(settings.telemetry)
        port = SupervisorToolPort(reporter, self.tracing)
        kit = ToolKit(port, Path(settings.workspace), settings.mcp_servers, sandbox)
        self._reports = ReportBatcher(self._send_reports)
        self._billing = SupervisorBillingPort(reporter)
        self.core = AgentHostCore(
            host_id,
            provider_factory(settings),
            self._reports.report,
            make_tools=kit.build,
            idle_release_s=settings.idle_release_s,
            idle_pools=settings.idle_pools,
            tool_steps=settings.tool_steps,
            recover=self._recover_context,
            compaction_threshold=settings.compaction_threshold,
            budget=SupervisorBudgetPort(reporter),
            fleet=SupervisorFleetPort(reporter, settings.limited_providers),
            billed=self._billing.tell,
            cache=settings.cache,
            steps=SupervisorStepPort(reporter).store if settings.durable_steps else None,
            tracing=self.tracing,
            review_retry_s=settings.review_retry_s,
        )
        self._janitor: asyncio.Task[None] | None = None

    async def _recover_context(self, uuid: str, reason: str, tokens: int) -> list[Any] | None:
        """The supervisor compacts the agent's context; its new conversation, or None."""
        compacted: list[Any] | None = await self._reporter.recover_context.remote(
            uuid, reason, tokens
        )
        return compacted

    def _ensure_janitor(self) -> None:
        """Start the idle-release loop on the actor's own event loop (not there in __init__)."""
        if self._janitor is None:
            self._janitor = asyncio.get_running_loop().create_task(self._release_idle_forever())

    async def _send_reports(self, finished: list[tuple[Ticket, TurnResult]]) -> list[str]:
        """One call carrying finished turns; the ticket ids the supervisor did not store."""
        try:
            failed: list[str] = await asyncio.wait_for(
                self._reporter.complete_turns.remote(finished), REPORT_TIMEOUT_S
            )
        except (TimeoutError, ray.exceptions.RayError):
            return [ticket.ticket_id for ticket, _ in finished]
        return failed

    async def _release_idle_forever(self) -> None:
        interval = max(self.core.idle_release_s / 4, 0.05)
        while True:
            await asyncio.sleep(interval)
            await self.core.release_idle()

    async def flush_telemetry(self) -> None:
        """Export the spans this host has ended (before Grove stops it)."""
        await asyncio.to_thread(self.tracing.flush)

    async def ping(self) -> dict[str, Any]:
        return {"host": self.core.host_id, "pid": os.getpid(), "agents": len(self.core.agents)}

    async def prepare(
        self, uuid: str, choice: ModelChoice, activation: Activation | None = None
    ) -> None:
        self._ensure_janitor()
        await self.core.prepare(uuid, choice, activation)

    async def start_turn(self, ticket: Ticket, activation: Activation | None = None) -> None:
        self._ensure_janitor()
        self.core.start_turn(ticket, activation)

    async def prepare_many(
        self, items: list[tuple[str, ModelChoice, Activation | None]], prefix: list[Any]
    ) -> list[Exception | None]:
        """`prefix` arrives from the object store, as `start_many`'s."""
        self._ensure_janitor()
        return await self.core.prepare_many(items, prefix)

    async def start_turns(self, tickets: list[Ticket]) -> list[Exception | None]:
        self._ensure_janitor()
        return self.core.start_turns(tickets)

    async def start_many(
        self,
        items: list[tuple[Ticket, Activation]],
        prefix: list[Any],
        cached_content: str | None = None,
    ) -> None:
        """`prefix` arrives from the object store: put there once, read by every host."""
        self._ensure_janitor()
        self.core.start_many(items, prefix, cached_content)

    async def wait_started(self, ticket_id: str, timeout_s: float) -> bool:
        return await self.core.wait_started(ticket_id, timeout_s)

    async def create_cache(
        self, activation: Activation, prefix: list[Any], ttl_s: int
    ) -> CachedContent:
        return await self.core.create_cache(activation, prefix, ttl_s)

    async def drop_cache(self, choice: ModelChoice, name: str) -> None:
        await self.core.drop_cache(choice, name)

    async def activate(self, activation: Activation) -> None:
        self.core.activate(activation)

    async def stream(self, ticket_id: str) -> AsyncIterator[list[tuple[str, str]]]:
        async for chunk in self.core.stream(ticket_id):
            yield chunk

    async def watch(
        self, uuid: str, ticket_id: str | None = None
    ) -> AsyncIterator[list[tuple[str, str]]]:
        async for chunk in self.core.watch(uuid, ticket_id):
            yield chunk

    async def result(self, ticket_id: str) -> TurnResult:
        return await self.core.result(ticket_id)

    async def results(
        self, ticket_ids: list[str], timeout_s: float
    ) -> dict[str, TurnResult | None]:
        return await self.core.results(ticket_ids, timeout_s)

    async def cancel(self, uuid: str) -> bool:
        return await self.core.cancel(uuid)

    async def announce(self, uuid: str, kind: str, text: str) -> bool:
        return self.core.announce(uuid, kind, text)

    async def switch_model(self, uuid: str, choice: ModelChoice) -> None:
        await self.core.switch_model(uuid, choice)

    async def steer(self, uuid: str, entry: NewEntry) -> bool:
        return self.core.steer(uuid, entry)

    async def steer_many(self, entries: list[tuple[str, NewEntry]]) -> int:
        return self.core.steer_many(entries)

    async def drop(self, uuid: str) -> None:
        await self.core.drop(uuid)

    async def add_reviewer(self, spec: ReviewerSpec) -> None:
        """A reviewer with the read-only workspace tools and `advise`, which goes to the
        supervisor; its reports go there too."""
        self._ensure_janitor()
        reporter = self._reporter

        async def send_advice(arguments: dict[str, Any]) -> str:
            ok, text = await asyncio.wait_for(
                reporter.advise.remote(spec.uuid, arguments), TOOL_CALL_TIMEOUT_S
            )
            if not ok:
                raise ToolRefused(text)
            return str(text)

        async def report(review: ReviewReport) -> None:
            # A lost report is not retried: the next one carries the whole state again.
            with contextlib.suppress(TimeoutError, ray.exceptions.RayError):
                await asyncio.wait_for(reporter.reviewed.remote(review), REPORT_TIMEOUT_S)

        tools = {**readonly_tools(Path(spec.workspace)), "advise": advise_tool(send_advice)}
        self.core.add_reviewer(spec, tools, report)

    async def review(self, uuid: str, delta: str) -> tuple[int, int]:
        return self.core.review(uuid, delta)

    async def reset_reviewer(self, uuid: str, primer: str) -> tuple[int, int]:
        return self.core.reset_reviewer(uuid, primer)

    async def drop_reviewer(self, uuid: str) -> None:
        await self.core.drop_reviewer(uuid)

    async def reviewer_view(self, uuid: str, what: str) -> Any:
        """`status` (a dict), `dump` or `dump raw` (text)."""
        reviewer = self.core.reviewers[uuid]
        if what == "status":
            return reviewer.status()
        return reviewer.dump(raw=what == "dump raw")

    async def complete(
        self, choice: ModelChoice, system: str, prompt: str, max_tokens: int
    ) -> AssistantTurn:
        return await self.core.complete(choice, system, prompt, max_tokens)

    async def provider_identity(self, uuid: str) -> dict[str, Any]:
        return {"pid": os.getpid(), **self.core.provider_identity(uuid)}
