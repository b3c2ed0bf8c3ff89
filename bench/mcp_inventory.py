"""A small stdio MCP server for bench/tools.py: one `lookup` tool answering at once, so the
benchmark measures the MCP path (session, JSON-RPC, result) and not the tool.
"""

from __future__ import annotations

import os

from mcp.server.mcpserver import MCPServer

server = MCPServer("inventory")


@server.tool()
def lookup(key: str) -> str:
    """Look a key up in the inventory."""
    return f"{key}: 3 in stock (server {os.getpid()})"


if __name__ == "__main__":
    server.run()
