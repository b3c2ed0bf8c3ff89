"""A small MCP server over stdio (or streamable HTTP with `--http PORT`): arithmetic, an echo
of its environment, a tool that fails, and one that kills the server.
"""

from __future__ import annotations

import os
import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("calc")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@server.tool()
def pid() -> str:
    """The server's process id."""
    return str(os.getpid())


@server.tool()
def has_variable(name: str) -> str:
    """Whether the server's environment has a variable."""
    return "yes" if name in os.environ else "no"


@server.tool()
def refuse(reason: str) -> str:
    """Fail with `reason`."""
    raise ValueError(reason)


@server.tool()
def die() -> str:
    """End the server process at once."""
    os._exit(3)


if __name__ == "__main__":
    if "--http" in sys.argv:
        port = int(sys.argv[sys.argv.index("--http") + 1])
        server.run("streamable-http", host="127.0.0.1", port=port)
    else:
        sys.stderr.write("calc server starting\n")
        server.run()
