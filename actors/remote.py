"""The Ray face of actors/: `AgentHost` as an async Ray actor.

It reports finished turns to whatever `reporter` actor it was given (the supervisor), and asks
it everything else through `RayProxy[SupervisorAPI]` (actors/supervisor_gates.py).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import ray

from grove.actors.advisor import RETRY_DELAY_S
from grove.actors.advisor_messages import ReviewerSpec, advise_tool
from grove.actors.agent import MAX_STEPS_PER_TURN, ModelChoice, NewEntry, TurnResult
from grove.actors.collector import tune_collector
from grove.actors.contract import SupervisorAPI
from grove.actors.host import DEFAULT_IDLE_POOLS, Activation, AgentHostCore, Ticket
from grove.actors.ray_proxy import RayProxy
from grove.actors.reports import ReportBatcher
from grove.actors.supervisor_gates import BudgetGate, FleetGate, ToolGate, TurnRecords
from grove.actors.telemetry import TelemetrySettings, start_tracing
from grove.actors.tools.kit import ToolKit
from grove.actors.tools.mcp import McpServerConfig
from grove.actors.tools.readonly import readonly_tools
from grove.actors.tools.sandbox import SandboxPolicy
from grove.providers.base import AssistantTurn, CachePolicy, Provider
from grove.providers.factory import create_provider
from grove.providers.google.cache import CachedContent
from grove.providers.http import Endpoint
from grove.providers.pricing import set_prices
from grove.providers.retry import RetryPolicy


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


@ray.remote
class AgentHost:
    """Hosts many agents; a few of these run per node."""

    def __init__(self, host_id: str, settings: HostSettings, reporter: Any) -> None:
        tune_collector()
        set_prices(settings.prices)
        supervisor = RayProxy[SupervisorAPI](reporter, SupervisorAPI)
        sandbox = replace(settings.sandbox, hidden=(*settings.sandbox.hidden, *_ray_files()))
        self.tracing = start_tracing(settings.telemetry)
        self._tools = ToolGate(supervisor, self.tracing)
        kit = ToolKit(self._tools, Path(settings.workspace), settings.mcp_servers, sandbox)
        self._records = TurnRecords(supervisor)
        self._reports = ReportBatcher(self._records.send_reports)
        self.core = AgentHostCore(
            host_id,
            provider_factory(settings),
            self._reports.report,
            make_tools=kit.build,
            idle_release_s=settings.idle_release_s,
            idle_pools=settings.idle_pools,
            tool_steps=settings.tool_steps,
            recover=supervisor.call.recover_context,
            compaction_threshold=settings.compaction_threshold,
            budget=BudgetGate(supervisor),
            fleet=FleetGate(supervisor, settings.limited_providers),
            billed=self._records.billed,
            cache=settings.cache,
            steps=self._records.store_steps if settings.durable_steps else None,
            tracing=self.tracing,
            review_retry_s=settings.review_retry_s,
        )
        self._janitor: asyncio.Task[None] | None = None

    def _ensure_janitor(self) -> None:
        """Start the idle-release loop on the actor's own event loop (not there in __init__)."""
        if self._janitor is None:
            self._janitor = asyncio.get_running_loop().create_task(self._release_idle_forever())

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

        async def send_advice(arguments: dict[str, Any]) -> str:
            return await self._tools.advise(spec.uuid, arguments)

        tools = {**readonly_tools(Path(spec.workspace)), "advise": advise_tool(send_advice)}
        self.core.add_reviewer(spec, tools, self._records.reviewed)

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
