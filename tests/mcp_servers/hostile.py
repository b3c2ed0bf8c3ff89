"""An MCP server that misbehaves on request, over stdio (or streamable HTTP with `--http PORT`,
JSON answers with `--json`): a tool that never answers, one that answers with N megabytes, one
whose text would drive a terminal, its pid, an echo; with `--never-start` it reads its input
and never answers.
"""

from __future__ import annotations

import os
import sys
import time

if "--never-start" in sys.argv:  # before the SDK's import, which takes seconds
    sys.stderr.write("hostile server: not answering\n")
    sys.stderr.flush()
    sys.stdin.read()
    time.sleep(1_000_000)

from mcp.server.mcpserver import MCPServer

TERMINAL_TRAP = "\x1b]0;mcp-title\x07\x1b[2J\x1b]52;c;bWNw\x07mcp done"

server = MCPServer("hostile")


@server.tool()
def hang() -> str:
    """Never answers (it sleeps in the server's worker thread)."""
    time.sleep(1_000_000)
    return "never"


@server.tool()
def huge(megabytes: int) -> str:
    """A text of `megabytes` megabytes."""
    return "h" * (megabytes * 1024 * 1024)


@server.tool()
def escapes() -> str:
    """Text with a window title, a clear screen and a clipboard write in it."""
    return TERMINAL_TRAP


@server.tool()
def pid() -> str:
    """The server's process id."""
    return str(os.getpid())


@server.tool()
def echo(text: str) -> str:
    """`text` back."""
    return text


if __name__ == "__main__":
    if "--http" in sys.argv:
        port = int(sys.argv[sys.argv.index("--http") + 1])
        json_response = "--json" in sys.argv
        server.run("streamable-http", host="127.0.0.1", port=port, json_response=json_response)
    else:
        server.run()
