"""`grove usage`: requests, tokens, cost, savings and time per agent, model, provider, tier or
day, with each tree's total; from the service or the store (no Ray). The sums are usage.py's.
"""

from __future__ import annotations

import json
import sys
from typing import Annotated, Literal

import typer

from grove.cli.context import CliContext, fail
from grove.cli.printable import printable
from grove.providers.errors import GroveError
from grove.supervisor.usage_table import report_lines


def usage_command(
    ctx: typer.Context,
    agent: Annotated[
        str | None,
        typer.Option(
            "--agent", help="Only this agent (uuid or unique prefix) and its descendants."
        ),
    ] = None,
    by: Annotated[
        Literal["agent", "model", "provider", "tier", "day"],
        typer.Option(
            "--by",
            help="Group by agent (with each tree's total), model, provider, price tier, day.",
        ),
    ] = "agent",
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object.")] = False,
) -> None:
    """What the stored requests used: requests, input, output, thinking, cache read and cache
    write tokens, cost, what caching and the flex and batch tiers saved ("tier $", against the
    standard price), and time (a model's replies and compaction summaries)."""
    context: CliContext = ctx.obj
    with context.reads() as reads:
        try:
            report = reads.usage(agent, by)
        except GroveError as exc:
            fail(str(exc))
    if as_json:
        sys.stdout.write(json.dumps(report) + "\n")
        return
    sys.stdout.write(printable("".join(f"{line}\n" for line in report_lines(report))))
