"""`grove mcp`: Grove as an MCP server on stdio, its tools in cli/mcp_tools.py. Stdout carries
the protocol alone: the SDK points file descriptor 1 at stderr while it serves, and the Grove
(Ray with it) starts inside that window, so nothing it prints reaches the wire.
"""

from __future__ import annotations

from typing import Annotated

import typer

from grove.cli.context import AllowOption, CliContext, HostsOption, SimulateOption, fail
from grove.providers.errors import GroveError

SessionOption = Annotated[
    list[str] | None,
    typer.Option(
        "--session",
        metavar="AGENT",
        help="Let the client see and drive this session too (the tree of AGENT, an id or a "
        "unique start of one); repeatable. Without it, only the sessions the client makes.",
    ),
]


def mcp_command(
    ctx: typer.Context,
    simulate: SimulateOption = False,
    hosts: HostsOption = None,
    session: SessionOption = None,
    allow: AllowOption = None,
) -> None:
    """Serve Grove's tools to an MCP client over stdio (grove_run, grove_fork, grove_wait,
    grove_agents, grove_batch), on the running service when one is up, else on a Grove of
    this command's own. Point an editor's MCP configuration at this command.

    The client reaches only the sessions it makes and those given with --session; its agents
    run without asking only the tools of --allow and [tools.policy], and a fork of a given
    session whose tools may do more is refused. A tool that would ask is refused, as nobody
    can answer here."""
    from grove.cli.mcp_tools import Fleet, mcp_server

    context: CliContext = ctx.obj
    try:
        fleet = Fleet(context, simulate, hosts, granted=session or (), allow=allow or ())
    except (GroveError, ValueError) as exc:
        fail(f"--session: {exc}", code=2)
    mcp_server(fleet).run("stdio")
