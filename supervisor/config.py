"""Grove's configuration: defaults < config file (config.toml) < environment (GROVE_*) < flags.

The file lives in the Grove config directory beside credentials.json; keys never live here.
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from grove.actors.sandbox_limits import SandboxLimits
from grove.providers.base import CachePolicy, ProviderName
from grove.providers.catalog import DEFAULT_MODELS, checked_prices
from grove.providers.credentials import API_KEY_ENV, BASE_URL_ENV, base_url_problem, config_dir
from grove.providers.errors import GroveError, ModelSpecError
from grove.providers.lifecycle import chosen_model
from grove.providers.retry import RetryPolicy

CONFIG_FILE = "config.toml"


class ConfigError(GroveError):
    """The config file or a GROVE_* variable cannot be used; the text says where and why."""


def _usable_url(value: str) -> str:
    problem = base_url_problem(value)
    if problem:
        raise ValueError(problem)
    return value


UsableUrl = Annotated[str, AfterValidator(_usable_url)]  # http(s), with a host


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Defaults(_Section):
    model: str | None = Field(default=None, description="MODEL[/THINKING] for new root agents")

    @field_validator("model")
    @classmethod
    def _valid_spec(cls, value: str | None) -> str | None:
        return None if value is None else _checked_spec(value)


class ProviderSettings(_Section):
    base_url: UsableUrl | None = None
    api: Literal["responses", "chat"] = "responses"
    # The fleet's limits on this provider, shared by every host (supervisor/fleet.py).
    rpm: int | None = Field(default=None, ge=1, description="Requests a minute")
    tpm: int | None = Field(default=None, ge=1, description="Input tokens a minute")
    max_concurrency: int | None = Field(default=None, ge=1, description="Requests at once")


DEFAULT_RETRY = RetryPolicy()  # the defaults live in providers/retry.py only


class RetrySection(_Section):
    """`[providers.retry]`: how a failed request is tried again (every provider, every host);
    a server's own retry-after still wins over the delays."""

    attempts: int = Field(
        default=DEFAULT_RETRY.max_attempts,
        ge=1,
        le=20,
        description="Tries of a request, the first too",
    )
    base_delay_s: float = Field(
        default=DEFAULT_RETRY.base_delay_s,
        gt=0,
        le=60,
        allow_inf_nan=False,
        description="Wait after the first failure",
    )
    max_delay_s: float = Field(
        default=DEFAULT_RETRY.max_delay_s,
        gt=0,
        le=600,
        allow_inf_nan=False,
        description="Cap of the doubling waits",
    )

    @model_validator(mode="after")
    def _ordered(self) -> RetrySection:
        if self.base_delay_s > self.max_delay_s:
            raise ValueError(
                f"base_delay_s ({self.base_delay_s:g}) is more than max_delay_s "
                f"({self.max_delay_s:g})"
            )
        return self

    def policy(self) -> RetryPolicy:
        return RetryPolicy(
            max_attempts=self.attempts,
            base_delay_s=self.base_delay_s,
            max_delay_s=self.max_delay_s,
        )


class Providers(_Section):
    anthropic: ProviderSettings = ProviderSettings()
    openai: ProviderSettings = ProviderSettings()
    google: ProviderSettings = ProviderSettings()
    retry: RetrySection = RetrySection()

    def for_provider(self, provider: ProviderName) -> ProviderSettings:
        settings: ProviderSettings = getattr(self, provider)
        return settings


class Models(_Section):
    aliases: dict[str, str] = Field(default_factory=dict)
    prices: dict[str, list[float]] = Field(
        default_factory=dict,
        description="USD per million input, output[, cache read, cache write] tokens, by model id",
    )

    @field_validator("prices")
    @classmethod
    def _prices(cls, prices: dict[str, list[float]]) -> dict[str, list[float]]:
        checked_prices(prices)
        return prices


class LimitSettings(_Section):
    fork_depth: int = Field(default=4, ge=1, description="Levels of children below a root")
    children_per_agent: int = Field(default=32, ge=1, description="Children one agent may fork")
    tool_steps: int = Field(
        default=50, ge=1, le=1000, description="Model steps one turn may take calling tools"
    )


RESERVE_OUTPUT_TOKENS = 4_096  # what a budgeted request holds for its reply, by default


class BudgetSection(_Section):
    """`[budget]`: a limit over each tree that run, chat and batch start (none by default)."""

    tokens: int | None = Field(default=None, gt=0, description="Input plus output tokens")
    cost_usd: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    seconds: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    turns: int | None = Field(default=None, gt=0)
    soft: float = Field(default=0.8, gt=0, le=1, description="Share that warns, once")
    reserve_output: int = Field(
        default=RESERVE_OUTPUT_TOKENS, gt=0, description="Reply tokens each request holds"
    )
    strict: bool = Field(default=False, description="Cap max_tokens at what a request holds")
    hard_stop: Literal["finish", "cancel"] = Field(
        default="finish", description="cancel: stop replies that outgrow the budget"
    )

    def budget(self) -> dict[str, Any] | None:
        """The budget as a root's metadata holds it; None when no limit is set."""
        limits = {"tokens": self.tokens, "cost_usd": self.cost_usd, "seconds": self.seconds}
        limits["turns"] = self.turns
        if all(value is None for value in limits.values()):
            return None
        return self.model_dump()


SANDBOX_LIMITS = SandboxLimits()  # the defaults live in actors/sandbox_limits.py only


class SandboxSection(_Section):
    """`[tools.sandbox]`: where the processes tools start (bash) may write, and what they reach."""

    mode: Literal["workspace-write", "read-only", "off"] = Field(
        default="workspace-write",
        description="workspace-write: write in the workspace only; read-only; off: no sandbox",
    )
    network: bool = Field(default=False, description="Let sandboxed processes reach the network")
    writable: list[str] = Field(
        default_factory=list, description="More paths sandboxed processes may write"
    )
    hidden: list[str] = Field(
        default_factory=list, description="More paths hidden from sandboxed processes"
    )
    processes: int = Field(
        default=SANDBOX_LIMITS.processes, ge=16, le=65_536, description="Processes at once"
    )
    memory_mb: int = Field(
        default=SANDBOX_LIMITS.memory_mb, ge=64, le=1 << 20, description="Address space a process"
    )
    file_size_mb: int = Field(
        default=SANDBOX_LIMITS.file_size_mb, ge=1, le=1 << 20, description="Largest file written"
    )
    cpu_s: int = Field(
        default=SANDBOX_LIMITS.cpu_s, ge=1, le=86_400, description="CPU seconds a process"
    )
    tmp_mb: int = Field(
        default=SANDBOX_LIMITS.tmp_mb,
        ge=1,
        le=1 << 20,
        description="Size of its own /tmp (and /run, /dev/shm), held in memory",
    )
    env: list[str] = Field(
        default_factory=list,
        max_length=256,
        description="More variables of Grove's environment that sandboxed processes get",
    )

    @field_validator("env")
    @classmethod
    def _variable_names(cls, names: list[str]) -> list[str]:
        for name in names:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,127}", name):
                raise ValueError(f"{name!r} is not a variable name (letters, digits and _)")
            if any(name in keys for keys in API_KEY_ENV.values()):
                raise ValueError(f"{name} is a provider's key: no tool's process gets it")
        return names

    def limits(self) -> SandboxLimits:
        return SandboxLimits(
            processes=self.processes,
            memory_mb=self.memory_mb,
            file_size_mb=self.file_size_mb,
            cpu_s=self.cpu_s,
            tmp_mb=self.tmp_mb,
        )


class ToolsSection(_Section):
    modules: list[str] = Field(
        default_factory=list, description="package.module:attr specs of user tools"
    )
    default: list[str] | None = Field(
        default=None, description="The tools of chat and run roots (default: todo, fork, ...)"
    )
    policy: dict[str, Literal["allow", "ask", "deny"]] = Field(default_factory=dict)
    workspace: Literal["shared", "worktree"] = Field(
        default="shared",
        description="Where forked children work: their parent's directory, or a git worktree",
    )
    sandbox: SandboxSection = SandboxSection()


MCP_CALL_TIMEOUT_S = 120.0
MCP_STARTUP_TIMEOUT_S = 10.0


class McpServerSection(_Section):
    """One MCP server: `command` (with `args`, `env`, `cwd`) for stdio, or `url` (with
    `headers`) for streamable HTTP."""

    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict, repr=False)  # tokens, often
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict, repr=False)
    enabled: bool = True
    timeout_s: float = Field(
        default=MCP_CALL_TIMEOUT_S, gt=0, le=3600, description="Seconds a call may take"
    )
    startup_timeout_s: float = Field(
        default=MCP_STARTUP_TIMEOUT_S, gt=0, le=600, description="Seconds the server has to start"
    )

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerSection:
        if (self.command is None) == (self.url is None):
            raise ValueError("give either command (stdio) or url (streamable HTTP)")
        problem = base_url_problem(self.url) if self.url is not None else None
        if problem:
            raise ValueError(problem)
        return self


class McpSection(_Section):
    servers: dict[str, McpServerSection] = Field(default_factory=dict)

    @field_validator("servers")
    @classmethod
    def _plain_names(cls, servers: dict[str, McpServerSection]) -> dict[str, McpServerSection]:
        for name in servers:
            if not re.fullmatch(r"[A-Za-z0-9_-]{1,32}", name) or "__" in name:
                raise ValueError(f"server name {name!r}: letters, digits, - and _ (no __)")
        return servers


class HostSection(_Section):
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


class ReviewerSection(_Section):
    name: str = Field(min_length=1, max_length=64)
    model: str
    prompt: str = ""

    @field_validator("model")
    @classmethod
    def _valid_model(cls, value: str) -> str:
        return _checked_spec(value)


class AdvisorSection(_Section):
    enabled: bool = False
    # The catalog's Anthropic default: a current model, never a retired one.
    model: str = f"{DEFAULT_MODELS['anthropic']}/med"
    subagents: bool = False
    sync_backlog: Literal["off", 1, 3, 5] = "off"
    retry_delay_s: float = Field(
        default=1.0,
        gt=0,
        le=600,
        allow_inf_nan=False,
        description="A reviewer's wait after a failed review, before it tries again",
    )
    reviewers: list[ReviewerSection] = Field(default_factory=list)

    @field_validator("model")
    @classmethod
    def _valid_model(cls, value: str) -> str:
        return _checked_spec(value)

    @field_validator("sync_backlog", mode="before")
    @classmethod
    def _number_from_text(cls, value: Any) -> Any:
        return int(value) if isinstance(value, str) and value.isdigit() else value

    def reviewer_sections(self) -> list[ReviewerSection]:
        """The named reviewers, or one called `advisor` on `model` when none are named."""
        return self.reviewers or [ReviewerSection(name="advisor", model=self.model)]


def _checked_spec(value: str) -> str:
    """A model a config file names: the checks of a model chosen on the command line (an
    unknown id, a typo of a known one, a retired one refused in one line)."""
    try:
        chosen_model(value)
    except ModelSpecError as exc:
        raise ValueError(str(exc)) from exc
    return value


class EventsSection(_Section):
    keep_days: float = Field(
        default=7.0, gt=0, allow_inf_nan=False, description="Days of the event log a service keeps"
    )

    @property
    def keep_s(self) -> float:
        return self.keep_days * 86_400


class ServiceSection(_Section):
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


class CompactionSection(_Section):
    """`[compaction]`: when and how an agent's older history is summarised."""

    enabled: bool = Field(default=True, description="Compact automatically (overflow, threshold)")
    threshold: float = Field(
        default=0.8, gt=0, le=1, description="Compact after a turn past this share of the window"
    )
    keep_recent_tokens: int = Field(
        default=20_000, ge=0, le=10_000_000, description="Recent history kept word for word"
    )
    model: str | None = Field(default=None, description="Model of summaries (default: the agent's)")
    strategy: Literal["summary", "snapcompact"] = Field(
        default="summary",
        description="summary: a model writes one; snapcompact: history printed on images",
    )


class CacheSection(_Section):
    """`[cache]`: provider prompt caching that follows the agent tree (on by default)."""

    enabled: bool = Field(default=True, description="Use the providers' caches")
    ttl: Literal["5m", "1h"] = Field(
        default="5m", description="How long a cached prefix lives (Anthropic; Gemini entries)"
    )

    def policy(self) -> CachePolicy | None:
        """What the requests ask for; None when caching is off."""
        return CachePolicy(ttl=self.ttl) if self.enabled else None


class TelemetrySection(_Section):
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


class GroveSettings(BaseSettings):
    """Everything configurable. `load_settings()` builds it with the file and the environment."""

    model_config = SettingsConfigDict(
        env_prefix="GROVE_", env_nested_delimiter="__", extra="forbid", validate_default=True
    )

    defaults: Defaults = Defaults()
    providers: Providers = Providers()
    models: Models = Models()
    limits: LimitSettings = LimitSettings()
    tools: ToolsSection = ToolsSection()
    mcp: McpSection = McpSection()
    hosts: HostSection = HostSection()
    advisor: AdvisorSection = AdvisorSection()
    compaction: CompactionSection = CompactionSection()
    budget: BudgetSection = BudgetSection()
    events: EventsSection = EventsSection()
    cache: CacheSection = CacheSection()
    service: ServiceSection = ServiceSection()
    telemetry: TelemetrySection = TelemetrySection()
    store: str | None = Field(default=None, description="sqlite:///path, redis://..., rediss://...")
    address: str | None = Field(default=None, description="Ray cluster address")

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        path = config_path()
        return (
            init_settings,
            env_settings,
            TomlConfigSettingsSource(settings_cls, toml_file=path if path.exists() else None),
        )


def config_path() -> Path:
    """The configuration file Grove reads: GROVE_CONFIG_FILE, else config.toml in
    `$XDG_CONFIG_HOME/grove` (`~/.config/grove`)."""
    override = os.environ.get("GROVE_CONFIG_FILE")
    return Path(override) if override else config_dir() / CONFIG_FILE


def load_settings(**flags: Any) -> GroveSettings:
    """Settings from every layer; flags given as None are left to the lower layers."""
    given = {key: value for key, value in flags.items() if value is not None}
    path = config_path()
    for variable in BASE_URL_ENV.values():
        problem = base_url_problem(os.environ[variable]) if os.environ.get(variable) else None
        if problem:
            raise ConfigError(f"{variable}: {problem}")
    try:
        return GroveSettings(**given)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path} is not UTF-8 text: byte 0x{exc.object[exc.start]:02x} at offset {exc.start}"
        ) from exc
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc'])}: {error['msg']}"
            for error in exc.errors()
        )
        raise ConfigError(
            f"invalid configuration ({path} or GROVE_* variables): {problems}"
        ) from exc
