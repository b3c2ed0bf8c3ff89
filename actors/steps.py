"""Durable turns, the agent's side: which calls of a conversation started and never returned,
and what the model is told of one that may not run again.

Pure functions over provider messages; the turn loop (actors/agent.py) stores and resumes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from grove.actors.turn_result import NewEntry
from grove.providers.base import Message, ToolCallPart, ToolResultPart

# Stores finished steps of a turn, `(index in the turn's entries, entry)` each, keyed by the
# turn's ticket and the index; the message id of each, or None when the supervisor refused
# them (the turn is no longer this agent's turn in flight).
StoreSteps = Callable[[list[tuple[int, NewEntry]]], Awaitable[list[int] | None]]
INTERRUPTED_FACT = "interrupted"


class StepRefused(Exception):
    """The supervisor would not store a step: another run of this turn has taken it over."""


def open_calls(history: Sequence[Message]) -> list[ToolCallPart]:
    """The calls of the conversation's last reply that have no result yet: they started
    (the reply is stored before its calls run) and their turn stopped before they returned."""
    answered: set[str] = set()
    for message in reversed(history):
        if message.role == "user":
            results = [p.call_id for p in message.parts if isinstance(p, ToolResultPart)]
            if not results:
                return []
            answered.update(results)
            continue
        calls = [part for part in message.parts if isinstance(part, ToolCallPart)]
        return [call for call in calls if call.call_id not in answered]
    return []


def interrupted_text(name: str) -> str:
    """The result of a call cut off by its host's death that is not safe to run again."""
    return (
        f"The call to {name} was interrupted before it returned (the process running it "
        "stopped); it may or may not have taken effect. Check before calling it again."
    )
