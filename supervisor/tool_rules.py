"""The rules about tools that every interface shares: the built-in names, which tools a root
gets by default, the approval policy per tool, and narrowing on fork (never widening).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

from grove.actors.tools.grant import MCP_PREFIX, ShippedTool, ToolGrant, mcp_server_grant
from grove.providers.base import ToolSpec
from grove.supervisor.config import GroveSettings
from grove.supervisor.config_tools import McpServerSection
from grove.supervisor.errors import CommandError

if TYPE_CHECKING:  # the MCP client is loaded where servers start: command lines stay quick
    from grove.actors.tools.mcp import McpServerConfig

Policy = Literal["allow", "ask", "deny"]
POLICIES: tuple[str, ...] = get_args(Policy)

# Ruled on by the supervisor (they touch the tree or the store), run through its tool port.
SUPERVISED_TOOL_NAMES = ("todo", "fork", "send", "wait")
WORKSPACE_READ_TOOL_NAMES = ("read", "search", "find")
WORKSPACE_WRITE_TOOL_NAMES = ("write", "edit", "bash")
BUILTIN_TOOL_NAMES = SUPERVISED_TOOL_NAMES + WORKSPACE_READ_TOOL_NAMES + WORKSPACE_WRITE_TOOL_NAMES
# What the root of `grove chat` and `grove run` has besides the configured user and MCP tools.
DEFAULT_ROOT_TOOLS = SUPERVISED_TOOL_NAMES


def unknown_tool_text(name: str) -> str:
    return (
        f"unknown tool {name!r}: the built-in tools are {', '.join(BUILTIN_TOOL_NAMES)}; "
        "a Python tool is a function or a 'package.module:attr' string"
    )


def default_policy(name: str) -> Policy:
    """Tools that change the workspace ask first; everything else is allowed."""
    return "ask" if name in WORKSPACE_WRITE_TOOL_NAMES else "allow"


def policy_for(name: str, overrides: Mapping[str, str]) -> Policy:
    """The configured policy of `name` (an MCP tool may be ruled as its whole server)."""
    for key in (name, mcp_server_grant(name)):
        chosen = overrides.get(key) if key else None
        if chosen in POLICIES:
            return chosen  # type: ignore[return-value]
    return default_policy(name)


def refusal_text(name: str) -> str:
    """The error result of an "ask" call where nobody can answer (run, batch, API)."""
    return (
        f"Tool {name} needs approval and nobody can give it here. To allow it, pass "
        f'--allow {name} or set [tools.policy] {name} = "allow" in the config.'
    )


def is_mcp(name: str) -> bool:
    return name.startswith(MCP_PREFIX)


def mcp_servers(settings: GroveSettings) -> dict[str, McpServerConfig]:
    """The enabled `[mcp.servers.NAME]` of the config, as hosts take them."""
    from grove.actors.tools.mcp import McpServerConfig

    return {
        name: McpServerConfig(
            name=name,
            command=server.command,
            args=tuple(server.args),
            env=tuple(server.env.items()),
            cwd=server.cwd,
            url=server.url,
            headers=tuple(server.headers.items()),
            timeout_s=server.timeout_s,
            startup_timeout_s=server.startup_timeout_s,
        )
        for name, server in settings.mcp.servers.items()
        if server.enabled
    }


def mcp_problems(servers: Mapping[str, McpServerSection]) -> list[str]:
    """One line for each enabled stdio server whose command cannot be found, as a host here
    would look for it (the server's PATH, else this process's; a path from its cwd)."""
    problems = []
    for name, server in servers.items():
        command = server.command
        if not server.enabled or command is None:
            continue
        if os.sep in command:
            path = Path(server.cwd or ".") / command
            if not (path.is_file() and os.access(path, os.X_OK)):
                problems.append(
                    f"MCP server {name}: command {command!r} is not an executable file; "
                    f"fix [mcp.servers.{name}] command or set enabled = false"
                )
        elif shutil.which(command, path=server.env.get("PATH", os.environ.get("PATH"))) is None:
            problems.append(
                f"MCP server {name}: command {command!r} is not on PATH; fix "
                f"[mcp.servers.{name}] command (a full path) or set enabled = false"
            )
    return problems


def has_tool(granted: Iterable[str], name: str) -> bool:
    grants = set(granted)
    return name in grants or mcp_server_grant(name) in grants


def narrowed(parent_tools: Sequence[str], requested: object) -> list[str]:
    """The tools a child asks for, each of which its parent has; never more than those."""
    if not isinstance(requested, list) or not all(isinstance(n, str) for n in requested):
        raise CommandError("fork's `tools` must be a list of tool names")
    missing = [name for name in requested if not has_tool(parent_tools, name)]
    if missing:
        raise CommandError(
            f"fork refused: the parent has no tool {', '.join(sorted(set(missing)))}; "
            "a child gets only tools its parent has"
        )
    return list(dict.fromkeys(requested))


# Metadata keys of an agent record: `tools` (names), `shipped_tools` (schemas and digests of
# user tools), `mcp_tools` (MCP servers' tool schemas) and `tool_policy` (name -> policy) are
# inherited by forks; a root also keeps
# `tool_sources` (digest -> pickled code), which a host fetches once, on first use.
INHERITED_TOOL_METADATA = ("tools", "shipped_tools", "mcp_tools", "tool_policy")


def grant_of(metadata: Mapping[str, Any]) -> ToolGrant:
    """What an agent's record lets it use, as its activation carries it to a host."""
    names = tuple(metadata.get("tools", ()))
    shipped = tuple(
        ShippedTool.from_data(data)
        for data in metadata.get("shipped_tools", ())
        if data.get("name") in names
    )
    listed = [data for data in metadata.get("mcp_tools", ()) if has_tool(names, data["name"])]
    mcp = tuple(
        ToolSpec(name=data["name"], description=data["description"], parameters=data["parameters"])
        for data in listed
    )
    idempotent = tuple(data["name"] for data in listed if data.get("idempotent"))
    policy = tuple(
        (name, chosen)
        for name, chosen in metadata.get("tool_policy", {}).items()
        if chosen != "allow"
    )
    return ToolGrant(
        names=names, shipped=shipped, mcp=mcp, policy=policy, mcp_idempotent=idempotent
    )
