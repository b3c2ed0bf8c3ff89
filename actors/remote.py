"""The Ray face of actors/: `AgentHost` as an async Ray actor.

It reports finished turns to whatever `reporter` actor it was given (the supervisor), and asks
it everything else through `RayProxy[SupervisorAPI]` (actors/supervisor_gates.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import ray

from grove.actors.advisor import RETRY_DELAY_S
from grove.actors.advisor_messages import ReviewerSpec, advise_tool
from grove.actors.agent import MAX_STEPS_PER_TURN, ModelChoice, Tool
from grove.actors.collector import tune_collector
from grove.actors.contract import SupervisorAPI
from grove.actors.host import DEFAULT_IDLE_POOLS, AgentHostCore, ReviewerTools
from grove.actors.ray_proxy import RayProxy
from grove.actors.reports import ReportBatcher
from grove.actors.supervisor_gates import BudgetGate, FleetGate, ToolGate, TurnRecords
from grove.actors.telemetry import TelemetrySettings, start_tracing
from grove.actors.tools.kit import ToolKit
from grove.actors.tools.mcp import McpServerConfig
from grove.actors.tools.readonly import readonly_tools
from grove.actors.tools.sandbox import SandboxPolicy
from grove.providers.base import CachePolicy, Provider
from grove.providers.factory import create_provider
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


def reviewer_tools(tools: ToolGate) -> ReviewerTools:
    """A reviewer's tools: the read-only workspace tools and `advise`, which goes to the
    supervisor."""

    def build(spec: ReviewerSpec) -> dict[str, Tool]:
        async def send_advice(arguments: dict[str, Any]) -> str:
            return await tools.advise(spec.uuid, arguments)

        return {**readonly_tools(Path(spec.workspace)), "advise": advise_tool(send_advice)}

    return build


class HostActor(AgentHostCore):
    """Hosts many agents; a few of these run per node. Only builds its parts: the supervisor
    behind its contract, the tools, the gates and the records its turns send up."""

    def __init__(self, host_id: str, settings: HostSettings, reporter: Any) -> None:
        tune_collector()
        set_prices(settings.prices)
        supervisor = RayProxy[SupervisorAPI](reporter, SupervisorAPI)
        sandbox = replace(settings.sandbox, hidden=(*settings.sandbox.hidden, *_ray_files()))
        tracing = start_tracing(settings.telemetry)
        tools = ToolGate(supervisor, tracing)
        kit = ToolKit(tools, Path(settings.workspace), settings.mcp_servers, sandbox)
        records = TurnRecords(supervisor)
        super().__init__(
            host_id,
            provider_factory(settings),
            ReportBatcher(records.send_reports).report,
            make_tools=kit.build,
            idle_release_s=settings.idle_release_s,
            idle_pools=settings.idle_pools,
            tool_steps=settings.tool_steps,
            recover=supervisor.call.recover_context,
            compaction_threshold=settings.compaction_threshold,
            budget=BudgetGate(supervisor),
            fleet=FleetGate(supervisor, settings.limited_providers),
            billed=records.billed,
            cache=settings.cache,
            steps=records.store_steps if settings.durable_steps else None,
            tracing=tracing,
            review_retry_s=settings.review_retry_s,
            reviewer_tools=reviewer_tools(tools),
            reviewed=records.reviewed,
        )


AgentHost = ray.remote(HostActor)
