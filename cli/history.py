"""`grove history UUID`: an agent's whole conversation (inherited messages included, what
compactions summarised, each compaction marked where it happened, typed answers as JSON).

From the service or read from the store, the same either way; what a conversation is belongs
to supervisor/store.
"""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer

from grove.cli.context import CliContext, fail
from grove.cli.printable import printable
from grove.cli.styles import DIM, styled
from grove.providers.errors import GroveError
from grove.supervisor import history_text


def message_block(message: dict[str, Any], owner: str) -> str:
    """A message as this command prints it: made printable, its thinking dimmed."""
    return history_text.message_block(
        message, owner, shown=printable, dim=lambda text: styled(sys.stdout, text, DIM)
    )


def history_command(
    ctx: typer.Context,
    agent: Annotated[str, typer.Argument(help="The agent's uuid or a unique prefix of it.")],
    as_json: Annotated[
        bool,
        typer.Option("--json", help='One JSON object: {"agent": uuid, "messages": [...]}.'),
    ] = False,
) -> None:
    """Show an agent's whole conversation, compactions marked where they happened."""
    context: CliContext = ctx.obj
    with context.reads() as reads:
        try:
            found = reads.history(agent)
        except GroveError as exc:
            fail(str(exc))
    if as_json:
        sys.stdout.write(json.dumps(found) + "\n")
        return
    sys.stdout.write(f"Agent {found['agent']}\n")
    for message in found["messages"]:
        sys.stdout.write(message_block(message, found["agent"]) + "\n\n")
