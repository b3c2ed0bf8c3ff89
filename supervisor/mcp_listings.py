"""`McpListings`: the tools of the MCP servers a Grove's roots are given, listed from each server
the first time a Grove needs it with that configuration, once however many roots ask at once.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

from grove.actors.tools.grant import MCP_PREFIX
from grove.actors.tools.mcp import ListedTool, McpServerConfig, list_server_tools
from grove.supervisor import bridge
from grove.supervisor.config import GroveSettings
from grove.supervisor.errors import CommandError
from grove.supervisor.tool_rules import is_mcp, mcp_servers


class McpListings:
    """The tools of each MCP server configuration listed or being listed (a future each,
    settled by whoever lists it; the lock guards the dict, no wait)."""

    def __init__(self) -> None:
        self._listings: dict[McpServerConfig, Future[list[ListedTool]]] = {}
        self._lock = threading.Lock()

    def tools(self, names: Sequence[str], settings: GroveSettings) -> list[dict[str, Any]]:
        """The schemas of the MCP tools `names` grants, as `settings` configures their
        servers: listed from each server the first time this Grove needs it with that
        configuration (same command, arguments and environment, same tools), once however
        many roots ask at once; a server that cannot be started is a warning each time, and
        its tools are left out."""
        wanted = {name[len(MCP_PREFIX) :].split("__")[0] for name in names if is_mcp(name)}
        servers = mcp_servers(settings)
        unknown = sorted(wanted - set(servers))
        if unknown:
            raise CommandError(f"no MCP server named {', '.join(unknown)} is configured")
        if not wanted:
            return []
        configs = [servers[name] for name in sorted(wanted)]
        with self._lock:  # concurrent first uses: one lists, the others wait for it
            claimed: dict[McpServerConfig, Future[list[ListedTool]]] = {
                config: Future() for config in configs if config not in self._listings
            }
            self._listings.update(claimed)
            listings = [self._listings[config] for config in configs]
        if claimed:
            self._list(claimed)
        return [
            {
                "name": tool.spec.name,
                "description": tool.spec.description,
                "parameters": tool.spec.parameters,
                "idempotent": tool.idempotent,
            }
            for listing in listings
            for tool in bridge.waited(listing)
        ]

    def _list(self, claimed: dict[McpServerConfig, Future[list[ListedTool]]]) -> None:
        """List the servers of `claimed` and settle their futures; a server that could not be
        listed gets no tools and is forgotten (the next root tries it again), and an
        interrupted listing is raised to everyone waiting for it."""
        try:
            found = bridge.run(list_server_tools({config.name: config for config in claimed}))
        except BaseException as exc:
            self._forget(list(claimed))
            for future in claimed.values():
                future.set_exception(exc)
            raise
        self._forget([config for config in claimed if config.name not in found])
        for config, future in claimed.items():
            future.set_result(found.get(config.name, []))

    def _forget(self, configs: list[McpServerConfig]) -> None:
        with self._lock:
            for config in configs:
                del self._listings[config]
