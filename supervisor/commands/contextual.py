"""The context commands: /context (how full the focused agent's context is) and /compact
(summarise its older history, spec/compaction.md).
"""

from __future__ import annotations

from supervisor.commands.registry import Command, CommandContext, CommandOutcome
from supervisor.compaction import compact, usage_of
from supervisor.errors import CommandError

STREAMING_COMPACT_TEXT = "Cannot compact while response is streaming."


async def context_command(ctx: CommandContext, args: str) -> CommandOutcome:
    if args.strip():
        raise CommandError("Usage: /context")
    usage = usage_of(ctx.core, ctx.focus)
    data = {
        "used": usage.used,
        "window": usage.window,
        "system": usage.system,
        "history": usage.history,
        "tool_results": usage.tool_results,
        "reported": usage.reported,
    }
    return CommandOutcome(text="\n".join(usage.lines()), data=data)


async def compact_command(ctx: CommandContext, args: str) -> CommandOutcome:
    if ctx.core.streaming(ctx.focus):
        raise CommandError(STREAMING_COMPACT_TEXT)
    done = await compact(
        ctx.core, ctx.focus, ctx.core.compaction, reason="manual", instructions=args.strip() or None
    )
    text = (
        f"Compacted {done.summarised} messages: context {done.tokens_before:,} -> "
        f"{done.tokens_after:,} tokens"
    )
    data = {
        "message": done.message.id,
        "tokens_before": done.tokens_before,
        "tokens_after": done.tokens_after,
    }
    return CommandOutcome(text=text, data=data)


CONTEXT_COMMANDS: tuple[Command, ...] = (
    Command(
        name="context",
        handler=context_command,
        usage="/context",
        summary="How full the focused agent's context is",
        mutates=False,
    ),
    Command(
        name="compact",
        handler=compact_command,
        usage="/compact [instructions]",
        summary="Summarise the focused agent's older history to free its context",
    ),
)
