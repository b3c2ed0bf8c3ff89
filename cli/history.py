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
from grove.supervisor.store.kinds import COMPACTION_KIND, SPENT_KIND, TURN_END_KIND


def message_block(message: dict[str, Any], owner: str) -> str:
    """`[id] kind` (plus `from <uuid>` when inherited), then its thinking and content."""
    origin = "" if message["agent_uuid"] == owner else f"  from {message['agent_uuid']}"
    kind, data = message["kind"], message["data"]
    lines = [f"[{message['id']}] {kind}{origin}"]
    if kind == COMPACTION_KIND:
        kept = data.get("first_kept_message_id") or "none"
        lines[0] += (
            f"  ({data.get('reason', '?')}: {data.get('tokens_before', 0):,} -> "
            f"{data.get('tokens_after', 0):,} tokens; the model sees this summary, then the "
            f"messages from [{kept}] on)"
        )
    elif kind == SPENT_KIND:
        stopped = data.get("stop_reason") or "?"
        lines[0] += (
            f"  (a reply of a turn that failed, {stopped}: counted, the model does not see it)"
        )
    elif kind == TURN_END_KIND:
        lines[0] += "  (the end of a turn that failed or was cancelled: not sent)"
    for part in data.get("parts", []):
        if isinstance(part, dict) and part.get("kind") == "thinking" and part.get("text"):
            lines.append(styled(sys.stdout, f"(thinking) {printable(part['text'])}", DIM))
    content = message["content"]
    if kind == "assistant" and data.get("output") is not None:  # a typed answer, as JSON
        retries = int(data.get("output_retries") or 0)
        lines[0] += f"  (typed{f', after {retries} output retries' if retries else ''})"
        content = json.dumps(data["output"], indent=2)
    elif kind == "assistant" and data.get("output_error"):
        lines[0] += "  (invalid output: the answer as it came, after its output retries)"
        lines.append(styled(sys.stdout, printable(str(data["output_error"])), DIM))
    if content:
        lines.append(printable(content))
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
