"""The report commands: /usage (what the session's tree used, per agent and in all) and
/history (the focused agent's whole conversation, as `grove history` shows it).
"""

from __future__ import annotations

from grove.supervisor.commands.parsing import split_words
from grove.supervisor.commands.registry import Command, CommandContext, CommandOutcome
from grove.supervisor.errors import CommandError
from grove.supervisor.history_text import message_block
from grove.supervisor.tree_view import message_json
from grove.supervisor.usage import GROUPINGS, subtree, usage_report
from grove.supervisor.usage_table import report_lines


async def usage_command(ctx: CommandContext, args: str) -> CommandOutcome:
    words = split_words(args)
    by = words[1] if len(words) == 2 and words[0] == "--by" else "agent"
    if words and (len(words) != 2 or words[0] != "--by" or by not in GROUPINGS):
        raise CommandError(f"Usage: /usage [--by {'|'.join(GROUPINGS)}]")
    store = ctx.core.store
    report = usage_report(store, subtree(store, ctx.core.agent(ctx.session)), by)
    data = report.as_dict()
    return CommandOutcome(text="\n".join(report_lines(data)), data=data)


async def history_command(ctx: CommandContext, args: str) -> CommandOutcome:
    if args.strip():
        raise CommandError("Usage: /history")
    messages = [message_json(m) for m in ctx.core.store.conversation(ctx.focus, compacted=False)]
    blocks = [message_block(message, ctx.focus) for message in messages]
    text = "\n\n".join(blocks) if blocks else "No messages yet"
    return CommandOutcome(text=text, data={"agent": ctx.focus, "messages": messages})


REPORT_COMMANDS: tuple[Command, ...] = (
    Command(
        name="usage",
        handler=usage_command,
        usage="/usage [--by agent|model|provider|day]",
        summary="What this session's agents used: requests, tokens, cost, time",
        mutates=False,
    ),
    Command(
        name="history",
        handler=history_command,
        usage="/history",
        summary="The focused agent's whole conversation, compactions marked",
        mutates=False,
    ),
)
