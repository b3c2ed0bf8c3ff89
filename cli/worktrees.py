"""`grove worktrees`: Grove's git worktrees of the repository here, with their agents, branches
and diff stats, from the service or the store (no Ray), the same either way; `--prune` removes
those of ended or merged agents (supervisor/worktrees.py).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from grove.cli.context import CliContext, fail
from grove.providers.errors import GroveError


def worktrees_command(
    ctx: typer.Context,
    prune: Annotated[
        bool,
        typer.Option(
            "--prune",
            help="Remove the worktrees of ended (dead, reaped) agents and those merged into "
            "HEAD; what was not committed is committed to the branch first, and a branch not "
            "merged is kept.",
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object a line.")] = False,
) -> None:
    """List Grove's worktrees of the git repository you are in: the branch, its agent and the
    agent's status, whether it is merged into HEAD, and its diff stat since the fork."""
    context: CliContext = ctx.obj
    with context.reads() as reads:
        try:
            rows = reads.worktrees(str(Path.cwd()), prune)
        except GroveError as exc:
            fail(str(exc))
    if as_json:
        for row in rows:
            sys.stdout.write(json.dumps(row) + "\n")
        return
    if not rows:
        sys.stdout.write("No worktrees of Grove's in this repository\n")
        return
    for row in rows:
        agent = row["agent"][:8] if row["agent"] else "-"
        merged = "merged" if row["merged"] else "not merged"
        done = f"  [{row['action']}]" if prune else ""
        sys.stdout.write(
            f"{row['branch']}  agent {agent} {row['status']}  {merged}  {row['diff_stat']}"
            f"{done}\n    {row['path']}\n"
        )
