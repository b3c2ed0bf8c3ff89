"""What an agent may use, as its activation carries it to a host: tool names, the user tools
shipped from the caller's process (by digest, with their schemas) and the approval policy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from grove.providers.base import ToolSpec

MCP_PREFIX = "mcp__"


def mcp_server_grant(name: str) -> str | None:
    """`mcp__fs__read` is covered by a grant (or a policy) of its whole server, `mcp__fs`."""
    if not name.startswith(MCP_PREFIX):
        return None
    server, separator, _ = name[len(MCP_PREFIX) :].partition("__")
    return f"{MCP_PREFIX}{server}" if separator and server else None


@dataclass(frozen=True, kw_only=True, slots=True)
class ShippedTool:
    """A Python tool defined where Grove was called; its code travels by `digest` on first use."""

    spec: ToolSpec
    digest: str
    sequential: bool = False
    idempotent: bool = False

    def to_data(self) -> dict[str, Any]:
        return {
            "name": self.spec.name,
            "description": self.spec.description,
            "parameters": self.spec.parameters,
            "digest": self.digest,
            "sequential": self.sequential,
            "idempotent": self.idempotent,
        }

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> ShippedTool:
        spec = ToolSpec(
            name=str(data["name"]),
            description=str(data["description"]),
            parameters=dict(data["parameters"]),
        )
        return cls(
            spec=spec,
            digest=str(data["digest"]),
            sequential=bool(data.get("sequential")),
            idempotent=bool(data.get("idempotent")),
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolGrant:
    """`names` lists every tool granted (built-in, shipped, and MCP tools or whole servers as
    `mcp__SERVER`); `policy` holds what is not allowed outright ("ask" or "deny" per name)."""

    names: tuple[str, ...] = ()
    shipped: tuple[ShippedTool, ...] = ()
    mcp: tuple[ToolSpec, ...] = ()  # the MCP tools granted, with their servers' schemas
    policy: tuple[tuple[str, str], ...] = ()
    # MCP tools whose annotations say read-only or idempotent: run again when cut off.
    mcp_idempotent: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.names)

    def policy_of(self, name: str) -> str:
        rules = dict(self.policy)
        server = mcp_server_grant(name)
        return rules.get(name) or (rules.get(server) if server else None) or "allow"
