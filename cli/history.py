"""`grove history UUID`: an agent's whole conversation (inherited messages included, and what
compactions summarised, each compaction marked where it happened).

Reads the store directly; what a conversation is belongs to supervisor/store.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Annotated

import typer

from cli.context import CliContext, fail
from cli.printable import printable
from cli.styles import DIM, styled
from providers.errors import GroveError

if TYPE_CHECKING:  # imported where used: `grove --help` stays quick
    from supervisor.store import MessageRecord


def message_block(message: MessageRecord, owner: str) -> str:
    """`[id] kind` (plus `from <uuid>` when inherited), then its thinking and content."""
    from supervisor.store.base import SPENT_KIND

    origin = "" if message.agent_uuid == owner else f"  from {message.agent_uuid}"
    lines = [f"[{message.id}] {message.kind}{origin}"]
    if message.kind == "compaction":
        data = message.data
        kept = data.get("first_kept_message_id") or "none"
        lines[0] += (
            f"  ({data.get('reason', '?')}: {data.get('tokens_before', 0):,} -> "
            f"{data.get('tokens_after', 0):,} tokens; the model sees this summary, then the "
            f"messages from [{kept}] on)"
        )
    elif message.kind == SPENT_KIND:
        stopped = message.data.get("stop_reason") or "?"
        lines[0] += (
            f"  (a reply of a turn that failed, {stopped}: counted, the model does not see it)"
        )
    for part in message.data.get("parts", []):
        if isinstance(part, dict) and part.get("kind") == "thinking" and part.get("text"):
            lines.append(styled(sys.stdout, f"(thinking) {printable(part['text'])}", DIM))
    if message.content:
        lines.append(printable(message.content))
    lines[0] = printable(lines[0])  # a reply's stop reason is the provider's word
    return "\n".join(lines)


def history_command(
    ctx: typer.Context,
    agent: Annotated[str, typer.Argument(help="The agent's uuid or a unique prefix of it.")],
    as_json: Annotated[
        bool,
        typer.Option("--json", help='One JSON object: {"agent": uuid, "messages": [...]}.'),
    ] = False,
) -> None:
    """Show an agent's whole conversation, compactions marked where they happened."""
    from supervisor.store import open_store
    from supervisor.tree_view import message_json

    context: CliContext = ctx.obj
    try:
        store = open_store(context.settings().store)
        context.warn_if_store_exposed()
        try:
            record = store.resolve_agent(agent)
            messages = store.conversation(record.uuid, compacted=False)
        finally:
            store.close()
    except GroveError as exc:
        fail(str(exc))
    if as_json:
        rows = [message_json(message) for message in messages]
        sys.stdout.write(json.dumps({"agent": record.uuid, "messages": rows}) + "\n")
        return
    sys.stdout.write(f"Agent {record.uuid}\n")
    for message in messages:
        sys.stdout.write(message_block(message, record.uuid) + "\n\n")
