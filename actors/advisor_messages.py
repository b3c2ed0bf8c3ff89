"""What passes between a reviewer, the agent it watches and the supervisor: the advisor's prompt
and `advise` tool, transcript deltas as markdown, advice cards, the spec and report types.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from grove.actors.agent.choice import ModelChoice
from grove.actors.agent.tool import Tool
from grove.actors.transcript import Entry
from grove.providers.base import ToolSpec

ADVICE_PREFIX = "Advisor (a senior reviewer watching your work — weigh it, don't blindly obey):"
SEVERITIES = ("nit", "concern", "blocker")
# A re-prime replays at most this much of the watched transcript.
BOUNDED_TRANSCRIPT_CHARS = 60_000

ADVISOR_SYSTEM = """You are a senior reviewer watching another AI agent work. After each of \
its turns you receive what happened in that turn: the user's messages, the agent's reasoning, \
its answers, tool calls and tool results. You may inspect the workspace with the read-only \
tools `read`, `search` and `find`. You cannot change anything.

When something deserves the agent's attention, call `advise` with one concise, specific note. \
Severity `nit` for cleanup or low-risk points (delivered as an aside), `concern` for a material \
risk or a likely wrong direction, `blocker` when continuing would clearly waste work or produce \
broken output (both interrupt the agent). Do not repeat advice you already gave. When all is \
well, say so in one short sentence and do not call `advise`."""

ADVISE = ToolSpec(
    name="advise",
    description="Send one concise note to the agent you are watching.",
    parameters={
        "type": "object",
        "properties": {
            "note": {"type": "string", "description": "The advice, one or two sentences."},
            "severity": {
                "type": "string",
                "enum": list(SEVERITIES),
                "description": "nit (default): an aside; concern or blocker: interrupts.",
            },
        },
        "required": ["note"],
    },
)


def render_delta(entries: Sequence[Entry]) -> str:
    """A transcript delta as markdown: thinking included, advisor cards left out."""
    blocks: list[str] = []
    for entry in entries:
        if entry.kind in ("advisor", "warning", "clear", "compaction"):
            continue
        if entry.kind == "assistant":
            for part in entry.data.get("parts", []):
                if part["kind"] == "thinking" and part.get("text"):
                    blocks.append("**Agent (thinking):**\n" + _quote(part["text"]))
                elif part["kind"] == "text" and part.get("text"):
                    blocks.append("**Agent:**\n" + part["text"])
                elif part["kind"] == "tool_call":
                    arguments = json.dumps(part["arguments"], ensure_ascii=False)
                    blocks.append(f"**Agent calls `{part['name']}`:** `{arguments}`")
        elif entry.kind == "tool_result":
            for part in entry.data.get("parts", []):
                label = "error" if part.get("is_error") else "result"
                blocks.append(f"**Tool `{part['name']}` {label}:**\n```\n{part['content']}\n```")
        elif entry.kind == "mail":
            blocks.append(f"**Mail from {entry.data.get('sender', '?')}:**\n{entry.content}")
        elif entry.kind in ("user", "steering"):
            blocks.append("**User:**\n" + entry.content)
    return "\n\n".join(blocks)


def _quote(text: str) -> str:
    return "\n".join("> " + line for line in text.splitlines())


@dataclass(frozen=True, kw_only=True, slots=True)
class ReviewerSpec:
    """What a host needs to start a reviewer: its model, prompt and workspace."""

    uuid: str
    name: str
    watched: str
    choice: ModelChoice
    system: str
    workspace: str
    context_window: int
    budgeted: bool = False  # the watched agent's tree has a budget: the reviewer draws on it


@dataclass(frozen=True, kw_only=True, slots=True)
class ReviewReport:
    """Sent to the supervisor after each update: what is left, and how it went."""

    reviewer: str
    backlog: int
    version: int  # orders reports and `update` answers: the higher one is the newer state
    ok: bool
    dropped: bool = False
    error: str | None = None
    health: dict[str, Any] = field(default_factory=dict)
    # What each request of this update used (usage, cost_usd, model, provider), to be stored.
    spent: list[dict[str, Any]] = field(default_factory=list)


Report = Callable[[ReviewReport], Awaitable[None]]


def advise_tool(send: Callable[[dict[str, Any]], Awaitable[str]]) -> Tool:
    """The `advise` tool; `send` forwards a validated note to the supervisor."""

    async def run(arguments: dict[str, Any]) -> str:
        note = arguments.get("note")
        severity = arguments.get("severity") or "nit"
        if not isinstance(note, str) or not note.strip():
            raise ValueError("advise needs a non-empty `note`")
        if severity not in SEVERITIES:
            raise ValueError(f"severity must be one of {', '.join(SEVERITIES)}, not {severity!r}")
        return await send({"note": note.strip(), "severity": severity})

    return Tool(spec=ADVISE, run=run)


def advice_card(notes: Sequence[tuple[str, str]], reviewer: str | None) -> str:
    """One card: the reference's prefix line, the reviewer's name, `- [severity] note` bullets."""
    lines = [ADVICE_PREFIX]
    if reviewer:
        lines.append(f"Reviewer: {reviewer}")
    lines += [f"- [{severity}] {note}" for severity, note in notes]
    return "\n".join(lines)
