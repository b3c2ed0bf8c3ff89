"""`grove models`: the catalog (each model's status, shutdown date, window and prices, each
provider's default marked), from the service or a Grove of this command's own, the same either
way. Presentation only; the rows are supervisor/model_table.py's.
"""

from __future__ import annotations

import json
import sys
from typing import Annotated, Literal

import typer

from grove.cli.context import CliContext, fail
from grove.cli.printable import printable
from grove.providers.errors import GroveError


def models_command(
    ctx: typer.Context,
    include_retired: Annotated[
        bool, typer.Option("--all", help="Include retired models (refused by run, chat, batch).")
    ] = False,
    provider: Annotated[
        Literal["anthropic", "openai", "google"] | None,
        typer.Option("--provider", help="Only this provider's models."),
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="One JSON list: id, provider, default, status, retires, successor, "
            "context_window, max_input_tokens, max_output_tokens, prices.",
        ),
    ] = False,
) -> None:
    """The models Grove knows: status (current, legacy, deprecated, retired), shutdown date,
    context window and prices per million tokens; each provider's default is marked *."""
    context: CliContext = ctx.obj
    with context.catalog() as grove:
        try:
            rows = grove.models(include_retired, provider)
        except GroveError as exc:
            fail(str(exc))
    if as_json:
        sys.stdout.write(json.dumps(rows) + "\n")
        return
    from grove.supervisor.model_table import table_lines

    sys.stdout.write(printable("".join(f"{line}\n" for line in table_lines(rows))))
