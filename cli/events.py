"""`grove events`: the event log as JSON lines, optionally followed as it grows; from the service
or read from the store, the same either way. Events are a projection: nothing here acts on them.
"""

from __future__ import annotations

import contextlib
import json
import select
import sys
from typing import TYPE_CHECKING, Annotated, Any, TextIO

import typer

from grove.cli.context import CliContext, fail
from grove.providers.errors import GroveError
from grove.providers.plurals import counted

if TYPE_CHECKING:
    from grove.supervisor.contract import ReadsAPI

FOLLOW_WAIT_S = 1.0
PAGE = 1000


def event_line(event: dict[str, Any]) -> str:
    return json.dumps(event, sort_keys=True)


def print_events(reads: ReadsAPI, after: int, follow: bool) -> None:
    """The events after `after`, a page at a time; then, following, each as it comes."""
    while page := reads.events(after, PAGE):
        sys.stdout.write("".join(event_line(event) + "\n" for event in page))
        after = page[-1]["id"]
    sys.stdout.flush()
    if follow:
        for found in reads.follow_events(after, FOLLOW_WAIT_S):
            sys.stdout.write("".join(event_line(event) + "\n" for event in found))
            sys.stdout.flush()
            if reader_gone(sys.stdout):  # `| head -2` is done: no waiting for the next event
                raise BrokenPipeError


def reader_gone(stream: TextIO) -> bool:
    """Whether nobody reads `stream` any more (a pipe whose reading end was closed)."""
    try:
        descriptor = stream.fileno()
    except (OSError, ValueError):  # not a file: a test's capture
        return False
    poller = select.poll()
    poller.register(descriptor, select.POLLOUT)
    return any(mask & (select.POLLERR | select.POLLHUP) for _, mask in poller.poll(0))


def events_command(
    ctx: typer.Context,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing new events until Ctrl+C.")
    ] = False,
    after: Annotated[int, typer.Option("--after", min=0, help="Only events with a larger id.")] = 0,
    compact: Annotated[
        bool,
        typer.Option(
            "--compact",
            help="Delete the events older than [events] keep_days (7 by default) and say how "
            "many went; a running service does this every hour by itself.",
        ),
    ] = False,
) -> None:
    """Print the event log as JSON lines, oldest first."""
    context: CliContext = ctx.obj
    with context.reads() as reads:
        try:
            if compact:
                trimmed = reads.trim_events()
                removed, days = trimmed["removed"], trimmed["keep_days"]
                age = counted(days, "day", spec="g")
                sys.stdout.write(f"Deleted {counted(removed, 'event')} older than {age}\n")
                return
            with contextlib.suppress(KeyboardInterrupt):
                print_events(reads, after, follow)
        except GroveError as exc:
            fail(str(exc))
