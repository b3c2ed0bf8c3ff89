"""`grove events`: the event log as JSON lines, optionally followed as it grows.

Reads the store directly; events are a projection and nothing here acts on them.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from typing import TYPE_CHECKING, Annotated

import typer

from cli.context import CliContext, fail
from supervisor.errors import StoreError

if TYPE_CHECKING:  # imported where used: `grove --help` stays quick
    from supervisor.store import EventRecord, Store

FOLLOW_POLL_S = 1.0


def event_json(event: EventRecord) -> str:
    return json.dumps(
        {
            "id": event.id,
            "kind": event.kind,
            "payload": event.payload,
            "created_at": event.created_at,
        },
        sort_keys=True,
    )


def print_events(store: Store, after: int, follow: bool) -> None:
    while True:
        batch = store.wait_events(after, FOLLOW_POLL_S) if follow else store.events(after)
        for event in batch:
            sys.stdout.write(event_json(event) + "\n")
            after = event.id
        sys.stdout.flush()
        if not follow and not batch:
            return


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
    from supervisor.store import open_store

    context: CliContext = ctx.obj
    settings = context.settings()
    try:
        store = open_store(settings.store)
        context.warn_if_store_exposed()
        try:
            if compact:
                removed = store.trim_events(time.time() - settings.events.keep_s)
                days = settings.events.keep_days
                sys.stdout.write(f"Deleted {removed:,} events older than {days:g} days\n")
                return
            with contextlib.suppress(KeyboardInterrupt):
                print_events(store, after, follow)
        finally:
            store.close()
    except StoreError as exc:
        fail(str(exc))
