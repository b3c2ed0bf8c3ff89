"""`grove agents`: the agent tree, from the service or read from the store (no Ray), the same
either way. Presentation only; the rows are supervisor/tree_view.py's.
"""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer

from grove.cli.context import CliContext, fail
from grove.cli.printable import printable
from grove.providers.errors import GroveError
from grove.providers.plurals import counted
from grove.supervisor.agent_tiers import marked_tier


def describe_model(row: dict[str, Any]) -> str:
    """`provider/model/thinking`, and the tier after it unless standard (a row from a service
    older than tiers has none)."""
    if row["model"] is None:
        return "no model"
    described = f"{row['provider']}/{row['model']}/{row['thinking_level'] or 'default'}"
    tier = marked_tier(row.get("tier"))
    return described if tier is None else f"{described} {tier}"


def tree_lines(rows: list[dict[str, Any]]) -> list[str]:
    """One line per agent, children indented under their parent, in the order of `rows` (an
    agent whose parent is not among them shows as a root)."""
    known = {row["uuid"] for row in rows}
    children: dict[str | None, list[dict[str, Any]]] = {}
    for row in rows:
        parent = row["parent_uuid"] if row["parent_uuid"] in known else None
        children.setdefault(parent, []).append(row)
    lines: list[str] = []

    def walk(row: dict[str, Any], depth: int) -> None:
        lines.append(
            f"{'  ' * depth}{row['uuid']}  {row['role']}  {row['status']}  "
            f"{describe_model(row)}  {counted(row['messages'], 'message')}"
        )
        for child in children.get(row["uuid"], []):
            walk(child, depth + 1)

    for root in children.get(None, []):
        walk(root, 0)
    return lines


def agents_command(
    ctx: typer.Context,
    include_ended: Annotated[
        bool, typer.Option("--all", help="Include dead and reaped agents.")
    ] = False,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="One JSON list: each agent's record, turn state, messages, tokens, cost and"
            " context share.",
        ),
    ] = False,
) -> None:
    """Show the agent tree: uuid, role, status, model, message count (oldest first)."""
    context: CliContext = ctx.obj
    with context.reads() as reads:
        try:
            found = reads.agents(include_ended)
        except GroveError as exc:
            fail(str(exc))
    rows, unreadable = found["agents"], found["unreadable"]
    if as_json:
        sys.stdout.write(json.dumps(rows) + "\n")
    else:
        lines = tree_lines(rows)
        shown = printable("".join(f"{line}\n" for line in lines))  # a model may name a model
        sys.stdout.write(shown if lines or unreadable else "No agents\n")
    if unreadable:
        for error in unreadable:
            sys.stderr.write(f"Skipped an unreadable agent record: {error}\n")
        raise typer.Exit(1)
