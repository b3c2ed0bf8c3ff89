"""The batch tier, the agent's side (SPEC 20): a step whose request goes on the batch tier asks
the supervisor's collector for its reply under a name of its own, instead of streaming it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Protocol

from grove.providers.base import (
    AssistantTurn,
    ProviderName,
    Request,
    TextPart,
    ThinkingPart,
    ToolResultPart,
)
from grove.providers.stream_events import ProviderWarning, StreamEvent, TextDelta, ThinkingDelta

WAITING_TEXT = "── waiting on a provider batch ──"
STEP_KEY_CHARS = 32  # a vendor's custom id holds it and the attempt (Anthropic: 64 at most)


@dataclass(frozen=True, kw_only=True, slots=True)
class BatchAnswer:
    """What the supervisor answers a step on the batch tier: its reply; or why it goes on the
    standard tier instead (`standard`: its batch tries are spent); or why it failed."""

    turn: AssistantTurn | None = None
    standard: str | None = None
    error: str | None = None


class BatchPort(Protocol):
    """Where a step's request on the batch tier goes (the supervisor's collectors)."""

    async def reply(
        self, agent: str, provider: ProviderName, step: str, request: Request
    ) -> BatchAnswer: ...


def step_key(agent: str, request: Request) -> str:
    """The step's name, the same when a turn cut off resumes and asks again: the agent, how
    far its conversation goes, and what its last message says (its text, the calls its
    results answer)."""
    last = request.messages[-1] if request.messages else None
    answered = (
        [part.call_id for part in last.parts if isinstance(part, ToolResultPart)] if last else []
    )
    role, text = (last.role, last.text) if last is not None else ("", "")
    name = f"{agent}|{len(request.messages)}|{role}|{','.join(answered)}|{text}"
    return hashlib.sha256(name.encode()).hexdigest()[:STEP_KEY_CHARS]


def waiting(request: Request) -> ProviderWarning:
    """What watchers see when a step joins a batch."""
    return ProviderWarning(text=f"{WAITING_TEXT} ({request.model})")


def shown(turn: AssistantTurn) -> list[StreamEvent]:
    """A batched reply as watchers see a streamed one: its thinking and text, part by part."""
    events: list[StreamEvent] = []
    for index, part in enumerate(turn.message.parts):
        if isinstance(part, ThinkingPart) and part.text:
            events.append(ThinkingDelta(index=index, text=part.text))
        elif isinstance(part, TextPart) and part.text:
            events.append(TextDelta(index=index, text=part.text))
    return events
