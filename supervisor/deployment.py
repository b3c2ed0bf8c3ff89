"""What a Grove starts its supervisor with: `SupervisorSettings` (and the hosts' `HostSettings`)
made from the configuration, resolved here, where the workspace and WATCHDOG.md live.
"""

from __future__ import annotations

from pathlib import Path

from grove.actors.host.settings import HostSettings
from grove.actors.telemetry import TelemetrySettings
from grove.actors.tools.sandbox import SandboxPolicy
from grove.providers.base import ProviderName
from grove.providers.errors import ModelSpecError
from grove.providers.http import Endpoint
from grove.providers.lifecycle import chosen_model
from grove.providers.model_specs import ModelSpec
from grove.supervisor.actor import SupervisorSettings
from grove.supervisor.advisor_plan import AdvisorPlan, ReviewerConfig
from grove.supervisor.config import GroveSettings
from grove.supervisor.context import CompactionPlan
from grove.supervisor.core.parts import Limits
from grove.supervisor.errors import CommandError
from grove.supervisor.fleet import ProviderLimits
from grove.supervisor.store import store_files
from grove.supervisor.supervision import RestartPolicy
from grove.supervisor.tiers.plan import BatchPlan
from grove.supervisor.tool_rules import mcp_servers

PROVIDERS: tuple[ProviderName, ...] = ("anthropic", "openai", "google")


def model_spec(settings: GroveSettings, text: str | None, setting: str = "") -> ModelSpec | None:
    """The model `text` names (None for none), or CommandError with its one line after
    `setting` (the config key it came from, where it came from one)."""
    try:
        return chosen_model(text, settings.models.aliases) if text else None
    except ModelSpecError as exc:
        raise CommandError(f"{setting}{exc}") from exc


def supervisor_settings(
    settings: GroveSettings,
    hosts: int,
    simulator: Endpoint | None,
    telemetry: TelemetrySettings | None,
) -> SupervisorSettings:
    """The supervisor's settings, with `hosts` hosts answered by `simulator` when given."""
    providers = settings.providers
    rate_limits = provider_limits(settings)
    host_settings = HostSettings(
        base_urls={name: providers.for_provider(name).base_url for name in PROVIDERS},
        openai_api=providers.openai.api,
        simulator=simulator,
        retry=providers.retry.policy(flex_fallback=settings.tiers.flex_fallback),
        idle_release_s=settings.hosts.idle_release_s,
        idle_pools=settings.hosts.idle_pools,
        tool_steps=settings.limits.tool_steps,
        durable_steps=settings.hosts.durable_steps,
        workspace=str(Path.cwd()),
        sandbox=sandbox_policy(settings),
        mcp_servers=mcp_servers(settings),
        compaction_threshold=(
            settings.compaction.threshold if settings.compaction.enabled else None
        ),
        limited_providers=frozenset(name for name, chosen in rate_limits.items() if chosen.any),
        prices=dict(settings.models.prices),
        cache=settings.cache.policy(),
        telemetry=telemetry,
        review_retry_s=settings.advisor.retry_delay_s,
    )
    return SupervisorSettings(
        store_url=settings.store,
        hosts=hosts,
        host_settings=host_settings,
        aliases=dict(settings.models.aliases),
        limits=Limits(
            fork_depth=settings.limits.fork_depth,
            children_per_agent=settings.limits.children_per_agent,
        ),
        advisor=advisor_plan(settings),
        restart_policy=RestartPolicy(
            max_restarts=settings.hosts.max_restarts,
            window_s=settings.hosts.restart_window_s,
        ),
        compaction=compaction_plan(settings),
        rate_limits=rate_limits,
        fork_workspace=settings.tools.workspace,
        batch=BatchPlan(
            window_s=settings.tiers.batch_window_s,
            size=settings.tiers.batch_size,
            tries=settings.tiers.batch_tries,
        ),
    )


def sandbox_policy(settings: GroveSettings) -> SandboxPolicy:
    """`[tools.sandbox]`, hiding the store's files besides what it names."""
    section = settings.tools.sandbox
    return SandboxPolicy(
        mode=section.mode,
        network=section.network,
        writable=tuple(section.writable),
        hidden=(*section.hidden, *store_files(settings.store)),
        limits=section.limits(),
        env=tuple(section.env),
    )


def provider_limits(settings: GroveSettings) -> dict[str, ProviderLimits]:
    providers = settings.providers
    return {
        name: ProviderLimits(
            rpm=providers.for_provider(name).rpm,
            tpm=providers.for_provider(name).tpm,
            max_concurrency=providers.for_provider(name).max_concurrency,
        )
        for name in PROVIDERS
    }


def compaction_plan(settings: GroveSettings) -> CompactionPlan:
    section = settings.compaction
    return CompactionPlan(
        enabled=section.enabled,
        threshold=section.threshold,
        keep_recent_tokens=section.keep_recent_tokens,
        model=model_spec(settings, section.model, "[compaction] model: "),
        strategy=section.strategy,
    )


def advisor_plan(settings: GroveSettings) -> AdvisorPlan:
    """The advisor settings, with the reviewers' models resolved and this workspace's
    WATCHDOG.md."""
    from grove.actors.watchdog import watchdog_prompt

    section = settings.advisor
    workspace = Path.cwd()
    aliases = settings.models.aliases
    try:
        reviewers = tuple(
            ReviewerConfig(
                name=reviewer.name,
                model=chosen_model(reviewer.model, aliases),
                prompt=reviewer.prompt,
            )
            for reviewer in section.reviewer_sections()
        )
    except ModelSpecError as exc:
        raise CommandError(f"[advisor] model: {exc}") from exc
    return AdvisorPlan(
        enabled=section.enabled,
        subagents=section.subagents,
        sync_backlog=section.sync_backlog,
        reviewers=reviewers,
        workspace=str(workspace),
        watchdog=watchdog_prompt(workspace),
    )
