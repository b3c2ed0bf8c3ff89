"""`grove agents`: the agent tree, read from the store directly (no Ray, no supervisor).

Presentation only; the tree's records and rules belong to supervisor/store.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Annotated

import typer

from cli.context import CliContext, fail
from supervisor.errors import StoreError

if TYPE_CHECKING:  # imported where used: `grove --help` stays quick
    from supervisor.store import AgentRecord, Store


def describe_model(record: AgentRecord) -> str:
    if record.model is None:
        return "no model"
    return f"{record.provider}/{record.model}/{record.thinking_level or 'default'}"


def tree_lines(store: Store, include_ended: bool, unreadable: list[str]) -> list[str]:
    """One line per agent, children indented under their parent, in creation order; the
    errors of records that cannot be read go to `unreadable` (a child of one shows as a root)."""
    agents = store.list_agents(include_ended=include_ended, unreadable=unreadable)
    known = {agent.uuid for agent in agents}
    children: dict[str | None, list[AgentRecord]] = {}
    for agent in agents:
        parent = agent.parent_uuid if agent.parent_uuid in known else None
        children.setdefault(parent, []).append(agent)
    counts = store.message_counts(known)
    lines: list[str] = []

    def walk(record: AgentRecord, depth: int) -> None:
        count = counts[record.uuid]
        noun = "message" if count == 1 else "messages"
        lines.append(
            f"{'  ' * depth}{record.uuid}  {record.role}  {record.status}  "
            f"{describe_model(record)}  {count} {noun}"
        )
        for child in children.get(record.uuid, []):
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
    """Show the agent tree: uuid, role, status, model, message count."""
    from supervisor.store import open_store
    from supervisor.tree_view import tree_rows

    context: CliContext = ctx.obj
    if as_json:
        try:
            store = open_store(context.settings().store)
            try:
                rows = tree_rows(store, include_ended)["agents"]
            finally:
                store.close()
        except StoreError as exc:
            fail(str(exc))
        sys.stdout.write(json.dumps(rows) + "\n")
        return
    unreadable: list[str] = []
    try:
        store = open_store(context.settings().store)
        context.warn_if_store_exposed()
        try:
            lines = tree_lines(store, include_ended, unreadable)
        finally:
            store.close()
    except StoreError as exc:
        fail(str(exc))
    sys.stdout.write(
        "".join(f"{line}\n" for line in lines) if lines or unreadable else "No agents\n"
    )
    if unreadable:
        for error in unreadable:
            sys.stderr.write(f"Skipped an unreadable agent record: {error}\n")
        raise typer.Exit(1)
