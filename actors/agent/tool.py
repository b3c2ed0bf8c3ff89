"""What a tool is to an agent: `Tool` (its schema and the coroutine that runs it), its output,
and the lines a turn's watchers see of it (a failing tool raises ToolError, actors/errors.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from grove.providers.base import ImageData, ToolSpec
from grove.providers.stream_events import StreamEvent

PREVIEW_CHARS = 160


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolOutput:
    """A tool result with images besides its text (an MCP server's image content, say)."""

    text: str
    images: tuple[ImageData, ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class Tool:
    """A tool an agent may call: its schema and the coroutine that runs it (text, or text
    with images). The calls of one step run concurrently, but a `sequential` tool's calls
    run one at a time, in order. `idempotent` (for all calls, or per call's arguments): a
    call cut off by a host's death may run again when its turn resumes."""

    spec: ToolSpec
    run: Callable[[dict[str, Any]], Awaitable[str | ToolOutput]]
    sequential: bool = False
    idempotent: bool | Callable[[dict[str, Any]], bool] = False

    def repeatable(self, arguments: dict[str, Any]) -> bool:
        """Whether this call may run a second time without a second effect."""
        if callable(self.idempotent):
            return self.idempotent(arguments)
        return self.idempotent


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolActivity:
    """A tool call starting or its result, as one short line for whoever watches the turn."""

    kind: Literal["tool_call", "tool_result"]
    text: str


# Where a turn's events go as they happen: the model's deltas and its tools' activity.
Emit = Callable[[StreamEvent | ToolActivity], None]


def preview(text: str) -> str:
    """One line of at most PREVIEW_CHARS characters."""
    line = " ".join(text.split())
    return line if len(line) <= PREVIEW_CHARS else line[: PREVIEW_CHARS - 1] + "…"
