"""`HostSettings`: how a host is set up (where providers are reached, its tools' workspace and
sandbox, its pools, telemetry), as the supervisor hands it to each host it starts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from grove.actors.advisor import RETRY_DELAY_S
from grove.actors.agent.turn_loop import MAX_STEPS_PER_TURN
from grove.actors.host.pools import DEFAULT_IDLE_POOLS
from grove.actors.telemetry import TelemetrySettings
from grove.actors.tools.mcp import McpServerConfig
from grove.actors.tools.sandbox import SandboxPolicy
from grove.providers.base import CachePolicy
from grove.providers.http import Endpoint
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
