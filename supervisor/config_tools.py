"""The config sections of tools: `[tools]` (with `[tools.sandbox]`, what tool processes may
write and reach) and `[mcp]` (the MCP servers whose tools agents get).
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from grove.actors.sandbox_limits import SandboxLimits
from grove.providers.credentials import API_KEY_ENV, base_url_problem
from grove.supervisor.config_fields import ConfigSection

SANDBOX_LIMITS = SandboxLimits()  # the defaults live in actors/sandbox_limits.py only


class SandboxSection(ConfigSection):
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


class ToolsSection(ConfigSection):
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


class McpServerSection(ConfigSection):
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


class McpSection(ConfigSection):
    servers: dict[str, McpServerSection] = Field(default_factory=dict)

    @field_validator("servers")
    @classmethod
    def _plain_names(cls, servers: dict[str, McpServerSection]) -> dict[str, McpServerSection]:
        for name in servers:
            if not re.fullmatch(r"[A-Za-z0-9_-]{1,32}", name) or "__" in name:
                raise ValueError(f"server name {name!r}: letters, digits, - and _ (no __)")
        return servers
