"""A small MCP server over stdio (or streamable HTTP with `--http PORT`): arithmetic, an echo
of its environment, an image, a tool that fails, and one that kills the server. With
`CALC_STARTS` set, each start over stdio adds a line to that file (tests count the starts).
"""

from __future__ import annotations

import base64
import os
import sys

from mcp.server.mcpserver import Image, MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("calc")
ONE_PIXEL_PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@server.tool(annotations=ToolAnnotations(idempotent_hint=True, read_only_hint=False))
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
def badge() -> Image:
    """A one-pixel PNG."""
    return Image(data=ONE_PIXEL_PNG, format="png")


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
        if "CALC_STARTS" in os.environ:
            with open(os.environ["CALC_STARTS"], "a") as starts:
                starts.write(f"{os.getpid()}\n")
        server.run()
