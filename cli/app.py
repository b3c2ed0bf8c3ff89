"""The `grove` command line: one Typer app, each command in its own module.

Heavy imports (the simulator, Ray, prompt_toolkit) happen inside the commands that need them.
"""

from __future__ import annotations

import logging
import sys
from typing import Annotated

import typer

from cli.agents import agents_command
from cli.batch import batch_command
from cli.chat import chat_command
from cli.context import CliContext, show_error
from cli.doctor import doctor_command
from cli.events import events_command
from cli.history import history_command
from cli.run import run_command
from cli.service import down_command, status_command, up_command
from cli.simulate import simulate_command
from cli.usage import usage_command
from cli.worktrees import worktrees_command
from providers.credentials import warn_if_credentials_exposed
from providers.errors import GroveError

# The commands that load provider keys, and so warn about a credentials file others can read.
CREDENTIAL_COMMANDS = frozenset({"chat", "run", "batch"})

app = typer.Typer(
    name="grove",
    help="Grove: run many LLM agents as actors — forks, advisor reviewers, batch jobs.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,  # help texts are plain: MODEL[/THINKING] is not a markup tag
)


@app.callback()
def options(
    ctx: typer.Context,
    store: Annotated[
        str | None,
        typer.Option(
            "--store",
            envvar="GROVE_STORE",
            help="Where agents and messages live: sqlite:///path (default), redis://host/db.",
        ),
    ] = None,
    address: Annotated[
        str | None,
        typer.Option("--address", envvar="RAY_ADDRESS", help="Join this Ray cluster."),
    ] = None,
) -> None:
    """Options shared by every command."""
    ctx.obj = CliContext(store=store, address=address)
    if ctx.invoked_subcommand in CREDENTIAL_COMMANDS:
        warn_if_credentials_exposed()


app.command("chat")(chat_command)
app.command("run")(run_command)
app.command("batch")(batch_command)
app.command("agents")(agents_command)
app.command("history")(history_command)
app.command("events")(events_command)
app.command("usage")(usage_command)
app.command("simulate")(simulate_command)
app.command("up")(up_command)
app.command("status")(status_command)
app.command("down")(down_command)
app.command("doctor")(doctor_command)
app.command("worktrees")(worktrees_command)


def show_grove_warnings() -> None:
    """Grove's own log records (logger `grove.*`) of level WARNING and up go to stderr as bare
    lines, e.g. the credentials.json permission warning."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(message)s"))
    grove_log = logging.getLogger("grove")
    grove_log.addHandler(handler)
    grove_log.setLevel(logging.WARNING)
    grove_log.propagate = False


def main() -> None:
    show_grove_warnings()
    try:
        app()
    except GroveError as exc:  # a problem Grove explains in a sentence: no traceback
        show_error(str(exc))
        sys.exit(1)


if __name__ == "__main__":
    main()
