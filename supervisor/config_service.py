"""The config sections of the deployment: agent `[hosts]`, the `[events]` log kept, the
`[service]` of `grove up`, and `[telemetry]` (OpenTelemetry traces).
"""

from __future__ import annotations

from pydantic import Field

from grove.supervisor.config_fields import ConfigSection, UsableUrl


class HostSection(ConfigSection):
    count: int | None = Field(default=None, ge=1, description="Agent hosts; default one per CPU")
    idle_release_s: float = Field(
        default=120.0, gt=0, description="Idle seconds before an agent's connections are closed"
    )
    idle_pools: int = Field(
        default=512,
        ge=0,
        le=100_000,
        description="Idle agents per host keeping their connections; the least recent close first",
    )
    max_restarts: int = Field(default=5, ge=0, description="Restarts of one host per window")
    restart_window_s: float = Field(default=60.0, gt=0, description="The window, in seconds")
    durable_steps: bool = Field(
        default=True,
        description="Store each step of a turn as it ends (off: a cut-off turn reruns whole)",
    )


class EventsSection(ConfigSection):
    keep_days: float = Field(
        default=7.0, gt=0, allow_inf_nan=False, description="Days of the event log a service keeps"
    )

    @property
    def keep_s(self) -> float:
        return self.keep_days * 86_400


class ServiceSection(ConfigSection):
    """`[service]`: what `grove up` serves, and to whom; whether a command that needs Ray
    starts one itself, and when a service started so stops."""

    autostart: bool = Field(
        default=True,
        description="A command that needs Ray and finds no service starts one in the background",
    )
    idle_stop_s: float = Field(
        default=900.0,
        gt=0,
        description="A service a command started stops after this long with no client and no turn",
    )

    max_streams: int = Field(
        default=1000, ge=1, le=100_000, description="Event streams one token may hold open"
    )
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description="Host names the API answers to besides IP addresses and localhost",
    )


class TelemetrySection(ConfigSection):
    """`[telemetry]`: OpenTelemetry traces over OTLP/HTTP (off unless an endpoint is named
    here or by the standard OTEL_* variables, which win: supervisor/telemetry.py)."""

    enabled: bool = Field(default=True, description="false: no traces, whatever names an endpoint")
    otlp_endpoint: UsableUrl | None = Field(
        default=None, description="The collector's OTLP/HTTP URL; spans go to its /v1/traces"
    )
    service_name: str = Field(default="grove", min_length=1, description="service.name of spans")
    headers: dict[str, str] = Field(
        default_factory=dict,
        repr=False,
        description="Headers of every export (a collector's token, say)",
    )
