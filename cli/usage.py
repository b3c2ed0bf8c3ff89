"""`grove usage`: requests, tokens, cost and time per agent, model, provider or day, with each
tree's total; read from the store directly (no Ray). The sums belong to supervisor/usage.py.
"""

from __future__ import annotations

import json
import sys
from typing import Annotated, Literal

import typer

from cli.context import CliContext, fail
from providers.errors import GroveError


def usage_command(
    ctx: typer.Context,
    agent: Annotated[
        str | None,
        typer.Option(
            "--agent", help="Only this agent (uuid or unique prefix) and its descendants."
        ),
    ] = None,
    by: Annotated[
        Literal["agent", "model", "provider", "day"],
        typer.Option("--by", help="Group by agent (with each tree's total), model, provider, day."),
    ] = "agent",
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object.")] = False,
) -> None:
    """What the stored requests used: requests, input, output, thinking, cache read and cache
    write tokens, cost and time (a model's replies and compaction summaries)."""
    from supervisor.store import open_store
    from supervisor.usage import report_lines, subtree, usage_report

    context: CliContext = ctx.obj
    try:
        store = open_store(context.settings().store)
        context.warn_if_store_exposed()
        try:
            agents = (
                subtree(store, store.resolve_agent(agent))
                if agent
                else store.list_agents(include_ended=True)
            )
            report = usage_report(store, agents, by)
        finally:
            store.close()
    except GroveError as exc:
        fail(str(exc))
    if as_json:
        sys.stdout.write(json.dumps(report.as_dict()) + "\n")
        return
    sys.stdout.write("".join(f"{line}\n" for line in report_lines(report)))
