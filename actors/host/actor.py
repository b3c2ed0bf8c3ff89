"""`AgentHost`, the class of a host's Ray actor (`AgentHostActor`): `AgentHostCore` built with
its parts from the host's settings, and nothing else (no method of its own).

It reports finished turns to whatever `reporter` actor it was given (the supervisor), and asks
it everything else through `RayProxy[SupervisorAPI]` (supervisor_gates.py).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import ray

from grove.actors.advisor_messages import ReviewerSpec, advise_tool
from grove.actors.agent.choice import ModelChoice, ProviderFactory
from grove.actors.agent.tool import Tool
from grove.actors.collector import tune_collector
from grove.actors.contract import SupervisorAPI
from grove.actors.host.core import AgentHostCore, HostParts, ReviewerTools
from grove.actors.host.reports import ReportBatcher
from grove.actors.host.settings import HostSettings
from grove.actors.host.supervisor_gates import (
    BatchGate,
    BudgetGate,
    FleetGate,
    ToolGate,
    TurnRecords,
)
from grove.actors.ray_proxy import RayProxy
from grove.actors.telemetry_otel import start_tracing
from grove.actors.tools.kit import ToolKit
from grove.actors.tools.readonly import readonly_tools
from grove.providers.factory import create_provider
from grove.providers.pricing import set_prices
from grove.providers.stream_events import Provider


def provider_factory(settings: HostSettings) -> ProviderFactory:
    """Each agent's own provider, reached as the host's settings say."""

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


class AgentHost(AgentHostCore):
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
        parts = HostParts(
            make_provider=provider_factory(settings),
            report=ReportBatcher(records.send_reports).report,
            make_tools=kit.build,
            recover=supervisor.call.recover_context,
            budget=BudgetGate(supervisor),
            fleet=FleetGate(supervisor, settings.limited_providers),
            batch=BatchGate(supervisor),
            billed=records.billed,
            steps=records.store_steps if settings.durable_steps else None,
            tracing=tracing,
            reviewer_tools=reviewer_tools(tools),
            reviewed=records.reviewed,
            cache=settings.cache,
            idle_release_s=settings.idle_release_s,
            idle_pools=settings.idle_pools,
            tool_steps=settings.tool_steps,
            compaction_threshold=settings.compaction_threshold,
            review_retry_s=settings.review_retry_s,
        )
        super().__init__(host_id, parts)


# Ray names the actor, in its logs and state, after the class: `AgentHost`.
AgentHostActor = ray.remote(AgentHost)
