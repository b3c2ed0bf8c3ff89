"""The actors' branch of Grove's error hierarchy: what a turn, its tools and its gates raise.
Every error class of actors/ derives from it; none is meant to leave the host it is raised in.

    GroveError                    (providers.errors)
     +-- ToolError                a tool failed: its text is the result the model reads
     |    +-- ToolRefused         the supervisor refused the call (host/supervisor_gates.py)
     |    +-- SandboxUnavailable, McpServerError   (tools/)
     +-- BudgetStop               the tree's budget is spent: no new request starts
     |    +-- BudgetCut           a reply cut off at the limit, with what streamed of it
     +-- StepRefused              another run of the turn has taken its steps over
     +-- ContextRecoveryError     compacted and still over the window, or not compacted
     +-- AnswerError              an answer that is not the JSON asked for
     +-- WorktreeError, WorkspaceError, ToolDefinitionError   (tools/)

Like every GroveError, each one's text is masked when it is made.
"""

from __future__ import annotations

from grove.providers.base import AssistantTurn
from grove.providers.errors import GroveError


class ToolError(GroveError):
    """Raised by a tool: its text is the error result the model sees, as it is; `detail`
    (a traceback) goes to the event log instead."""

    def __init__(self, text: str, *, detail: str = "") -> None:
        super().__init__(text)
        self.detail = detail


class ToolRefused(ToolError):
    """The supervisor refused a tool call; the text says why (the model is told, as is)."""


class BudgetStop(GroveError):
    """The tree's budget is spent: no new request starts (the text says which limit)."""


class BudgetCut(BudgetStop):
    """A reply was cut off at the budget's limit; `turn` is what streamed, with its usage
    estimated (the provider reports none for a reply stopped early)."""

    def __init__(self, text: str, turn: AssistantTurn) -> None:
        super().__init__(text)
        self.turn = turn


class StepRefused(GroveError):
    """The supervisor would not store a step: another run of this turn has taken it over."""


class ContextRecoveryError(GroveError):
    """The context was compacted and the request still did not fit, or it could not be."""


class AnswerError(GroveError):
    """An answer that is not the JSON asked for; the text says what is wrong, for the model."""
