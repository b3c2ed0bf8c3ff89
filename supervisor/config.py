"""Grove's configuration: defaults < config file (config.toml) < environment (GROVE_*) < flags.

The file lives in the Grove config directory beside credentials.json; keys never live here.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from providers.base import ProviderName
from providers.catalog import parse_model_spec
from providers.credentials import config_dir
from providers.errors import GroveError, ModelSpecError

CONFIG_FILE = "config.toml"


class ConfigError(GroveError):
    """The config file or a GROVE_* variable cannot be used; the text says where and why."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Defaults(_Section):
    model: str | None = Field(default=None, description="MODEL[/THINKING] for new root agents")

    @field_validator("model")
    @classmethod
    def _valid_spec(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                parse_model_spec(value)
            except ModelSpecError as exc:
                raise ValueError(str(exc)) from exc
        return value


class ProviderSettings(_Section):
    base_url: str | None = None
    api: Literal["responses", "chat"] = "responses"


class Providers(_Section):
    anthropic: ProviderSettings = ProviderSettings()
    openai: ProviderSettings = ProviderSettings()
    google: ProviderSettings = ProviderSettings()

    def for_provider(self, provider: ProviderName) -> ProviderSettings:
        settings: ProviderSettings = getattr(self, provider)
        return settings


class Models(_Section):
    aliases: dict[str, str] = Field(default_factory=dict)


class LimitSettings(_Section):
    fork_depth: int = Field(default=4, ge=1, description="Levels of children below a root")
    children_per_agent: int = Field(default=32, ge=1, description="Children one agent may fork")


class HostSection(_Section):
    count: int | None = Field(default=None, ge=1, description="Agent hosts; default one per CPU")
    idle_release_s: float = Field(
        default=120.0, gt=0, description="Idle seconds before an agent's connections are closed"
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
    hosts: HostSection = HostSection()
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
        path = _config_path()
        return (
            init_settings,
            env_settings,
            TomlConfigSettingsSource(settings_cls, toml_file=path if path.exists() else None),
        )


def _config_path() -> Path:
    override = os.environ.get("GROVE_CONFIG_FILE")
    return Path(override) if override else config_dir() / CONFIG_FILE


def load_settings(**flags: Any) -> GroveSettings:
    """Settings from every layer; flags given as None are left to the lower layers."""
    given = {key: value for key, value in flags.items() if value is not None}
    path = _config_path()
    try:
        return GroveSettings(**given)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from exc
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc'])}: {error['msg']}"
            for error in exc.errors()
        )
        raise ConfigError(
            f"invalid configuration ({path} or GROVE_* variables): {problems}"
        ) from exc
