"""`CoreParts`: all a deployment gives the supervisor's core when it is built, and the limits
and constants every job of the core shares. No logic lives here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from grove.actors.contract import HostAPI
from grove.actors.telemetry import NO_TRACING, Tracing
from grove.providers.base import CachePolicy
from grove.supervisor.advisor_plan import AdvisorPlan
from grove.supervisor.context import CompactionPlan
from grove.supervisor.store.base import Store
from grove.supervisor.store.records import AgentRecord, MessageRecord
from grove.supervisor.supervision import RestartPolicy
from grove.supervisor.tiers.plan import BatchPlan
from grove.supervisor.worktrees import Workspaces

ISOLATION_PROCESS = "process"
RECOVERING = "recovering"  # the ticket of a turn that a restarted supervisor runs again


@dataclass(frozen=True, kw_only=True, slots=True)
class Limits:
    """What stops runaway forking: tree depth below a root, children of one agent."""

    fork_depth: int = 4
    children_per_agent: int = 32


class BudgetGuard(Protocol):
    """What the core asks of the budgets (supervisor/budget.py's `BudgetDesk`, which takes the
    whole core and so is made from it: `SupervisorCore`'s `budgets`)."""

    def before_turn(self, record: AgentRecord, count: bool) -> None:
        """Refuses a new turn (`count`) or fork in a tree whose budget is spent."""
        ...

    def release(self, uuid: str, tokens: int = 0, cost_usd: float = 0.0) -> None:
        """Gives back what the requests in flight of an agent whose host died held, counting
        the tokens and cost of the one it had sent."""
        ...


def _unshared(value: list[MessageRecord]) -> Any:
    return value


@dataclass(frozen=True, kw_only=True, slots=True)
class CoreParts:
    """What a deployment gives the core when it is built: the store, the hosts (and how to
    start one of an agent's own), its settings and the tracing of roots' `create_agent`."""

    store: Store
    hosts: Mapping[str, HostAPI]  # the shared hosts, by id
    # A host of the agent's own (`isolation = "process"`): its id and contract.
    spawn_host: Callable[[str], tuple[str, HostAPI]] | None = None
    # Puts a value where every host can read it (the object store), once per fork point.
    share: Callable[[list[MessageRecord]], Any] = _unshared
    limits: Limits = field(default_factory=Limits)
    restart_policy: RestartPolicy = field(default_factory=RestartPolicy)
    advisor: AdvisorPlan | None = None  # None: this supervisor runs no reviewers
    compaction: CompactionPlan = field(default_factory=CompactionPlan)
    cache: CachePolicy | None = None  # `[cache]`
    batch: BatchPlan = field(default_factory=BatchPlan)  # `[tiers]`: provider batches
    tracing: Tracing = NO_TRACING
    workspaces: Workspaces = field(default_factory=Workspaces)  # where agents work
    holder: str  # this Grove's name among the store's holders of trees
