"""The `Supervisor` Ray actor: the core's surfaces (supervisor/core/) over hosts that are Ray
actors (ray_hosts.py), one per deployment. Built here; it has no method of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import ray

from grove.actors.collector import tune_collector
from grove.actors.host.settings import HostSettings
from grove.actors.telemetry_otel import start_tracing
from grove.providers.pricing import set_prices
from grove.supervisor.advisor_plan import AdvisorPlan
from grove.supervisor.context import CompactionPlan
from grove.supervisor.core.grove_surface import GroveSurface
from grove.supervisor.core.parts import CoreParts, Limits
from grove.supervisor.fleet import ProviderLimits
from grove.supervisor.holding import new_holder
from grove.supervisor.ray_hosts import RayHosts
from grove.supervisor.store import open_store
from grove.supervisor.supervision import RestartPolicy
from grove.supervisor.tiers.plan import BatchPlan
from grove.supervisor.worktrees import Workspaces

NAMESPACE = "grove"
SUPERVISOR_NAME = "grove-supervisor"


@dataclass(frozen=True, kw_only=True, slots=True)
class SupervisorSettings:
    store_url: str | None
    hosts: int
    host_settings: HostSettings
    aliases: dict[str, str]
    limits: Limits = field(default_factory=Limits)
    advisor: AdvisorPlan = field(default_factory=AdvisorPlan)
    restart_policy: RestartPolicy = field(default_factory=RestartPolicy)
    compaction: CompactionPlan = field(default_factory=CompactionPlan)
    rate_limits: dict[str, ProviderLimits] = field(default_factory=dict)
    fork_workspace: str = "shared"  # `[tools] workspace`: where children work by default
    batch: BatchPlan = field(default_factory=BatchPlan)  # `[tiers]`: its providers are the hosts'
    # Its name among the store's holders: the same after Ray restarts the supervisor.
    holder: str = field(default_factory=new_holder)


def _reconstructed() -> bool:
    """Whether Ray restarted this actor (its turns in flight are recovered from the store)."""
    return bool(ray.get_runtime_context().was_current_actor_reconstructed)


@ray.remote
class Supervisor(GroveSurface):
    """One per deployment, named `grove-supervisor` in the `grove` namespace: a GroveSurface
    (with its HostSurface) over the core, its hosts Ray actors behind their contract."""

    def __init__(self, settings: SupervisorSettings) -> None:
        tune_collector()
        set_prices(settings.host_settings.prices)
        # A host's death goes to the core (built below, before any host can die under a call).
        hosts = RayHosts(
            settings.host_settings,
            settings.hosts,
            NAMESPACE,
            died=lambda host_id, host, replace: self.core.host_died(host_id, host, replace),
            background=lambda work: self.core.background(work),
        )
        parts = CoreParts(
            store=open_store(settings.store_url),
            hosts=hosts.shared,
            spawn_host=hosts.spawn,
            share=ray.put,
            limits=settings.limits,
            restart_policy=settings.restart_policy,
            advisor=settings.advisor,
            compaction=settings.compaction,
            cache=settings.host_settings.cache,
            batch=replace(
                settings.batch,
                base_urls=settings.host_settings.base_urls,
                simulator=settings.host_settings.simulator,
                openai_api=settings.host_settings.openai_api,
            ),
            tracing=start_tracing(settings.host_settings.telemetry),
            workspaces=Workspaces(settings.host_settings.workspace, settings.fork_workspace),
            holder=settings.holder,
        )
        super().__init__(parts, hosts, settings.rate_limits, _reconstructed, settings.aliases)
