"""`grove mcp`: Grove as an MCP server on stdio, its tools in cli/mcp_tools.py. Stdout carries
the protocol alone: the SDK points file descriptor 1 at stderr while it serves, and the Grove
(Ray with it) starts inside that window, so nothing it prints reaches the wire.
"""

from __future__ import annotations

import typer

from cli.context import CliContext, HostsOption, SimulateOption


def mcp_command(
    ctx: typer.Context, simulate: SimulateOption = False, hosts: HostsOption = None
) -> None:
    """Serve Grove's tools to an MCP client over stdio (grove_run, grove_fork, grove_wait,
    grove_agents, grove_batch), on the running service when one is up, else on a Grove of
    this command's own. Point an editor's MCP configuration at this command."""
    from cli.mcp_tools import Fleet, mcp_server

    context: CliContext = ctx.obj

    mcp_server(Fleet(context, simulate, hosts)).run("stdio")
