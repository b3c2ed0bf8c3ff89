"""How full an agent's context is: the provider's reported input of its last request plus an
estimate (four characters a token) of what was appended since; and `[compaction]` as applied.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from grove.providers.model_specs import ModelSpec
from grove.supervisor.store.base import COMPACTION_KIND
from grove.supervisor.store.records import MessageRecord

CHARS_PER_TOKEN = 4
IMAGE_TOKENS = 1_600  # about what a full-size image bills on the providers' vision models
FRAMING_TOKENS = 4  # role and message framing


def estimate_tokens(text: str) -> int:
    return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def message_tokens(message: MessageRecord) -> int:
    """About how many tokens a stored message takes in a request (its text, tool names and
    arguments, results; signatures and other provider data left out)."""
    parts = message.data.get("parts")
    if not isinstance(parts, list) or not parts:
        return estimate_tokens(message.content) + FRAMING_TOKENS
    chars, images = 0, 0
    for part in parts:
        if not isinstance(part, dict):
            continue
        chars += len(str(part.get("text") or "")) + len(str(part.get("content") or ""))
        chars += len(str(part.get("name") or ""))
        if "arguments" in part:
            chars += len(json.dumps(part["arguments"], ensure_ascii=False))
        images += len(part.get("images") or ())
    return (chars + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN + images * IMAGE_TOKENS + FRAMING_TOKENS


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """`[compaction]` as the supervisor applies it."""

    enabled: bool = True
    threshold: float = 0.8
    keep_recent_tokens: int = 20_000
    model: ModelSpec | None = None  # the model of summaries; None: the agent's own
    strategy: str = "summary"  # or "snapcompact": history printed on image frames


@dataclass(frozen=True, slots=True)
class ContextUsage:
    """Tokens the next request would carry, and the model's window."""

    system: int
    history: int
    tool_results: int
    window: int
    reported: int  # input tokens the provider reported for the last request (0: none yet)

    @property
    def used(self) -> int:
        return self.system + self.history + self.tool_results

    @property
    def share(self) -> float:
        return self.used / self.window if self.window else 0.0

    def lines(self) -> list[str]:
        return [
            f"Context: {self.used:,} / {self.window:,} tokens ({self.share:.0%})",
            f"  system prompt  {self.system:,}",
            f"  history        {self.history:,}",
            f"  tool results   {self.tool_results:,}",
        ]


def context_usage(view: Sequence[MessageRecord], system: str | None, window: int) -> ContextUsage:
    """The usage of a conversation as `Store.conversation` gives it. The last request's
    reported input (and its reply) is the measure when there is one since the newest
    compaction; what came after it is estimated; the split is by estimate, scaled to that."""
    system_tokens = estimate_tokens(system or "")
    since = view[0].id if view and view[0].kind == COMPACTION_KIND else 0
    anchor, reported = -1, 0
    for index in range(len(view) - 1, -1, -1):
        message = view[index]
        if message.kind == "assistant" and message.id > since:
            usage = message.data.get("usage") or {}
            reported = int(usage.get("input_tokens") or 0)  # cached tokens included
            if reported:
                reported += int(usage.get("output_tokens") or 0)
                anchor = index
                break
    tool_tokens = sum(message_tokens(m) for m in view if m.kind == "tool_result")
    other_tokens = sum(message_tokens(m) for m in view if m.kind != "tool_result")
    if anchor >= 0:
        after = sum(message_tokens(m) for m in view[anchor + 1 :])
        measured = reported + after
        estimated = system_tokens + tool_tokens + other_tokens
        scale = measured / estimated if estimated else 1.0
        system_tokens = round(system_tokens * scale)
        tool_tokens = round(tool_tokens * scale)
        other_tokens = max(0, measured - system_tokens - tool_tokens)
    return ContextUsage(
        system=system_tokens,
        history=other_tokens,
        tool_results=tool_tokens,
        window=window,
        reported=reported,
    )
