"""`SupervisorCore`: the control plane's logic, one job a module: state, the tree, placement,
the turn protocol, recovery, forks and mail, each class building on the one before it.
"""

from __future__ import annotations

from collections.abc import Callable

from grove.supervisor.advisor_desk import AdvisorDesk
from grove.supervisor.core.mail import Mail
from grove.supervisor.core.parts import BudgetGuard, CoreParts
from grove.supervisor.fork_cache import ForkCaches


class SupervisorCore(Mail):
    """The whole core: its state and every job's methods, with the desks that take it whole
    (reviewers, fork caches, and the budgets, which `budgets` makes from it: budget.py reads
    the core, so the core does not import it). Plain asyncio: what Grove and the hosts ask
    reaches it through lifecycle.py and the surfaces beside it, which the Ray actor is."""

    def __init__(self, parts: CoreParts, budgets: Callable[[SupervisorCore], BudgetGuard]) -> None:
        super().__init__(parts)
        self.fork_caches = ForkCaches(self)
        self.budgets = budgets(self)
        self.advisors = None if parts.advisor is None else AdvisorDesk(self, parts.advisor)
