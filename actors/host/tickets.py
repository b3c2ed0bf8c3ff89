"""What a host is handed: an `Activation` builds an agent it does not hold yet, a `Ticket` is
one turn of an agent. Plain frozen data, sent across Ray by the supervisor.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from grove.actors.agent.choice import ModelChoice
from grove.actors.output import OutputType
from grove.actors.telemetry import TraceParent
from grove.actors.tools.grant import ToolGrant
from grove.actors.tools.worktrees import Worktree
from grove.actors.transcript import Entry
from grove.actors.turn_result import NewEntry


@dataclass(frozen=True, kw_only=True, slots=True)
class Activation:
    """What a host needs to build an agent it does not hold yet."""

    uuid: str
    choice: ModelChoice | None
    history: list[Entry]
    system: str | None = None
    tools: ToolGrant = field(default_factory=ToolGrant)
    budgeted: bool = False  # its tree has a budget: each request is checked first
    workspace: str | None = None  # the root of its workspace tools (None: the host's)
    worktree: Worktree | None = None  # its own worktree, committed to after each turn


@dataclass(frozen=True, kw_only=True, slots=True)
class Ticket:
    """One turn: which agent, what it is told, under which model."""

    ticket_id: str
    uuid: str
    user: NewEntry | None
    choice: ModelChoice
    output: OutputType | None = None  # a typed answer: its schema, checked here
    trace: TraceParent | None = None  # where the turn's span hangs in its tree's trace
