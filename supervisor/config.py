"""Grove's configuration: defaults < config file (config.toml) < environment (GROVE_*) < flags.
The root settings and their loading live here, the sections in config_*.py; keys never do.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from grove.providers.credentials import BASE_URL_ENV, base_url_problem, config_dir
from grove.supervisor.config_agents import (
    AdvisorSection,
    BudgetSection,
    CompactionSection,
    LimitSettings,
)
from grove.supervisor.config_providers import (
    CacheSection,
    Defaults,
    Models,
    Providers,
    TiersSection,
)
from grove.supervisor.config_service import (
    EventsSection,
    HostSection,
    ServiceSection,
    TelemetrySection,
)
from grove.supervisor.config_tools import McpSection, ToolsSection
from grove.supervisor.errors import ConfigError

CONFIG_FILE = "config.toml"


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
    tiers: TiersSection = TiersSection()
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
