"""How a host builds an agent's tools from its grant: the supervisor's tools through the port,
workspace tools on the agent's root (its worktree, or the host's), shipped Python tools and MCP
tools, each behind its policy.
"""

from __future__ import annotations

import asyncio
import pickle
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

from grove.actors.agent.tool import Tool, ToolOutput
from grove.actors.tools.editing import EDITING_TOOL_NAMES, editing_tools
from grove.actors.tools.fanout import ToolPort, fanout_tools
from grove.actors.tools.grant import ShippedTool, ToolGrant
from grove.actors.tools.mcp import McpPool, McpServerConfig
from grove.actors.tools.python import PythonTool, python_tool
from grove.actors.tools.readonly import READONLY_TOOL_NAMES, readonly_tools
from grove.actors.tools.sandbox import SandboxPolicy

WORKSPACE_TOOL_NAMES = READONLY_TOOL_NAMES + EDITING_TOOL_NAMES


class HostPort(ToolPort, Protocol):
    """The supervisor as a host's tools reach it."""

    async def source(self, agent: str, digest: str) -> bytes:
        """The pickled function of a shipped tool."""
        ...

    async def approve(self, agent: str, tool: str, arguments: dict[str, Any]) -> None:
        """Return when the call may run; raise with the reason when it may not."""
        ...


class ToolKit:
    """One per host. Stateless tools are built once per workspace root and shared by the
    host's agents there; a shipped tool's code is fetched and loaded once per host, on its
    first call. Processes the tools start run in `sandbox` (actors/tools/sandbox.py)."""

    def __init__(
        self,
        port: HostPort,
        workspace: Path,
        mcp_servers: Mapping[str, McpServerConfig],
        sandbox: SandboxPolicy | None = None,
    ) -> None:
        self._port = port
        self.mcp = McpPool(mcp_servers)
        self._workspace = str(workspace)
        self._sandbox = sandbox or SandboxPolicy()
        self._workspace_tools: dict[str, dict[str, Tool]] = {}
        self._loaded: dict[str, asyncio.Future[PythonTool]] = {}

    def workspace_tools(self, root: str | None = None) -> dict[str, Tool]:
        """The workspace tools on `root` (default: the host's workspace)."""
        root = root or self._workspace
        tools = self._workspace_tools.get(root)
        if tools is None:
            tools = self._workspace_tools[root] = {
                **readonly_tools(Path(root)),
                **editing_tools(Path(root), self._sandbox),
            }
        return tools

    def build(self, agent: str, grant: ToolGrant, workspace: str | None = None) -> dict[str, Tool]:
        tools = fanout_tools(self._port, agent, grant.names)
        if any(name in grant.names for name in WORKSPACE_TOOL_NAMES):
            workspace_tools = self.workspace_tools(workspace)
            tools.update({n: t for n, t in workspace_tools.items() if n in grant.names})
        tools.update({s.spec.name: self._shipped(agent, s) for s in grant.shipped})
        idempotent = set(grant.mcp_idempotent)
        tools.update({s.name: self.mcp.tool(s, s.name in idempotent) for s in grant.mcp})
        # A denied tool is not offered at all; one to ask about runs once someone says yes.
        return {
            name: self._gated(agent, tool, policy)
            for name, tool in tools.items()
            if (policy := grant.policy_of(name)) != "deny"
        }

    def _shipped(self, agent: str, shipped: ShippedTool) -> Tool:
        async def run(arguments: dict[str, Any]) -> str:
            loaded = self._loaded.get(shipped.digest)
            if loaded is None or (loaded.done() and loaded.exception() is not None):
                loaded = self._loaded[shipped.digest] = asyncio.ensure_future(
                    self._load(agent, shipped.digest)
                )
            made = await asyncio.shield(loaded)
            return await made.run(arguments)

        return Tool(
            spec=shipped.spec,
            run=run,
            sequential=shipped.sequential,
            idempotent=shipped.idempotent,
        )

    async def _load(self, agent: str, digest: str) -> PythonTool:
        payload = await self._port.source(agent, digest)
        # Grove's own supervisor packed this from the caller's function (supervisor/toolbox.py).
        return python_tool(pickle.loads(payload))

    def _gated(self, agent: str, tool: Tool, policy: str) -> Tool:
        if policy == "allow":
            return tool
        port, name = self._port, tool.spec.name

        async def run(arguments: dict[str, Any]) -> str | ToolOutput:
            await port.approve(agent, name, arguments)
            return await tool.run(arguments)

        return replace(tool, run=run)
