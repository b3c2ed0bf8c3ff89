"""The `grove` command line: one Typer app, each command in its own module, each written once
against the Grove interface and handed a running service's Grove or one of its own.

Heavy imports (the simulator, Ray, prompt_toolkit) happen inside the commands that need them.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from grove.cli.agents import agents_command
from grove.cli.batch import batch_command
from grove.cli.chat import chat_command
from grove.cli.coercion import lighten
from grove.cli.context import NO_SERVICE_ENV, CliContext, show_error
from grove.cli.doctor import doctor_command
from grove.cli.events import events_command
from grove.cli.failures import EXIT_FAILED, failure_line
from grove.cli.history import history_command
from grove.cli.mcp_command import mcp_command
from grove.cli.models import models_command
from grove.cli.run import run_command
from grove.cli.service import down_command, status_command, up_command
from grove.cli.simulate import simulate_command
from grove.cli.usage import usage_command
from grove.cli.worktrees import worktrees_command
from grove.providers.credentials import warn_if_credentials_exposed

# The commands that load provider keys, and so warn about a credentials file others can read.
CREDENTIAL_COMMANDS = frozenset({"chat", "run", "batch", "mcp"})
# Options of every command, taken before or after the command's name: with a value, a flag.
GLOBAL_OPTIONS = ("--store", "--address")
GLOBAL_FLAGS = ("--no-service",)
EXIT_BROKEN_PIPE = 141  # what a shell reports for a process a closed pipe stopped


def hoisted(args: list[str]) -> list[str]:
    """`args` with the global options given after the command moved before it (`grove agents
    --store URL` is `grove --store URL agents`); nothing after `--` moves."""
    front: list[str] = []
    rest: list[str] = []
    index, seen_command = 0, False
    while index < len(args):
        arg = args[index]
        if arg == "--":
            rest += args[index:]
            break
        if arg in GLOBAL_FLAGS or arg.partition("=")[0] in GLOBAL_OPTIONS:
            given = args[index : index + (1 if "=" in arg or arg in GLOBAL_FLAGS else 2)]
            (front if seen_command else rest).extend(given)
            index += len(given)
            continue
        seen_command = seen_command or not arg.startswith("-")
        rest.append(arg)
        index += 1
    return front + rest


def quiet_closed_pipe() -> None:
    """Whoever read our output has gone (`grove agents | head -1`): what is still buffered
    goes nowhere, so the exit is quiet."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        # Not a real file (a test's capture): nothing to quiet.
        with contextlib.suppress(OSError, ValueError):
            os.dup2(devnull, stream.fileno())
    os.close(devnull)


class GroveGroup(TyperGroup):
    """Global options after the command name, plain options converted without pydantic
    (cli/coercion.py), a closed pipe ending quietly with 141, and a Grove error, a Ray error or
    a timeout as one line and exit 1 (cli/failures.py)."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        lighten(self, ctx)
        try:
            return super().parse_args(ctx, hoisted(args))
        except BrokenPipeError:  # `grove --help | head -1`: the help is printed from here
            quiet_closed_pipe()
            raise typer.Exit(EXIT_BROKEN_PIPE) from None

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        name, command, rest = super().resolve_command(ctx, args)
        if command is not None:
            lighten(command, ctx)
        return name, command, rest

    def invoke(self, ctx: Any) -> Any:
        try:
            try:
                return super().invoke(ctx)
            finally:
                sys.stdout.flush()  # here, not at exit, where a closed pipe is a traceback
        except BrokenPipeError:
            quiet_closed_pipe()
            raise typer.Exit(EXIT_BROKEN_PIPE) from None
        except Exception as exc:
            line = failure_line(exc)
            if line is None:  # a bug: its traceback shows where
                raise
            show_error(line)
            raise typer.Exit(EXIT_FAILED) from None


app = typer.Typer(
    name="grove",
    cls=GroveGroup,
    help="Grove: run many LLM agents as actors — forks, advisor reviewers, batch jobs. While a "
    "service is up (grove up), run, chat, batch, agents, history, events and usage use it; run, "
    "chat and batch start one when none is up ([service] autostart). --store, --address or "
    "--no-service (before or after the command) give a command a Grove of its own.",
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
            help="Where agents and messages live: sqlite:///path (default), redis://host/db. "
            "Given on the command line, the command uses this store itself, not a service.",
        ),
    ] = None,
    address: Annotated[
        str | None,
        typer.Option(
            "--address",
            envvar="RAY_ADDRESS",
            help="Join this Ray cluster. Given on the command line, the command joins it "
            "itself, not through a service.",
        ),
    ] = None,
    no_service: Annotated[
        bool,
        typer.Option(
            "--no-service",
            envvar=NO_SERVICE_ENV,
            help="Run in this process: neither use a running Grove service nor start one "
            "(GROVE_NO_SERVICE=1 does the same).",
        ),
    ] = False,
) -> None:
    """Options shared by every command."""
    sources = [ctx.get_parameter_source(name) for name in ("store", "address")]
    typed = any(source is not None and source.name == "COMMANDLINE" for source in sources)
    ctx.obj = CliContext(store=store, address=address, own=typed, no_service=no_service)
    if ctx.invoked_subcommand in CREDENTIAL_COMMANDS:
        warn_if_credentials_exposed()


app.command("chat")(chat_command)
app.command("run")(run_command)
app.command("batch")(batch_command)
app.command("agents")(agents_command)
app.command("history")(history_command)
app.command("events")(events_command)
app.command("usage")(usage_command)
app.command("models")(models_command)
app.command("simulate")(simulate_command)
app.command("up")(up_command)
app.command("status")(status_command)
app.command("down")(down_command)
app.command("doctor")(doctor_command)
app.command("worktrees")(worktrees_command)
app.command("mcp")(mcp_command)


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
    app()


if __name__ == "__main__":
    main()
