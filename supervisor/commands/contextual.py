"""The context commands: /context (how full the focused agent's context is) and /compact
(summarise its older history, spec/compaction.md).
"""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path

from grove.providers.plurals import counted
from grove.supervisor.commands.parsing import split_words
from grove.supervisor.commands.registry import Command, CommandContext, CommandOutcome
from grove.supervisor.compaction import compact, usage_of
from grove.supervisor.errors import CommandError

STREAMING_COMPACT_TEXT = "Cannot compact while response is streaming."


async def context_command(ctx: CommandContext, args: str) -> CommandOutcome:
    words = split_words(args)
    if words and words[0] == "frames" and len(words) == 2:
        frames = current_frames(ctx)
        written = await asyncio.to_thread(write_frames, frames, words[1])
        text = f"Wrote {counted(len(written), 'frame')} to {words[1]}"
        return CommandOutcome(text=text, data={"files": written})
    if words:
        raise CommandError("Usage: /context [frames DIR]")
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
        f"Compacted {counted(done.summarised, 'message')}: context {done.tokens_before:,} -> "
        f"{done.tokens_after:,} tokens"
    )
    if done.warning:
        text = f"{done.warning}\n{text}"
    data = {
        "message": done.message.id,
        "tokens_before": done.tokens_before,
        "tokens_after": done.tokens_after,
    }
    return CommandOutcome(text=text, data=data)


def current_frames(ctx: CommandContext) -> list[str]:
    """The focused agent's snapcompact frames (base64 PNG), oldest first."""
    view = ctx.core.store.conversation(ctx.focus)
    frames = view[0].data.get("frames", []) if view and view[0].kind == "compaction" else []
    if not frames:
        raise CommandError("This agent's context holds no frames (no snapcompact compaction)")
    return [str(frame) for frame in frames]


def write_frames(frames: list[str], directory: str) -> list[str]:
    """The frames as `frame-01.png`, ... in `directory` (made if missing); their paths."""
    folder = Path(directory).expanduser()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        written = []
        for index, frame in enumerate(frames, start=1):
            path = folder / f"frame-{index:02d}.png"
            path.write_bytes(base64.b64decode(frame))
            written.append(str(path))
    except OSError as exc:
        raise CommandError(f"Cannot write frames to {directory}: {exc.strerror}") from exc
    return written


CONTEXT_COMMANDS: tuple[Command, ...] = (
    Command(
        name="context",
        handler=context_command,
        usage="/context [frames DIR]",
        summary="How full the focused agent's context is (frames DIR: write its frames)",
        mutates=False,
    ),
    Command(
        name="compact",
        handler=compact_command,
        usage="/compact [instructions]",
        summary="Summarise the focused agent's older history to free its context",
    ),
)
