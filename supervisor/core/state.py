"""`CoreState`: what every job of the supervisor's core shares: the store and event log, the
hosts, agents' live state, background tasks. The jobs themselves are the modules beside it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from grove.supervisor.billing import InFlightBilling
from grove.supervisor.core.parts import BudgetGuard, CoreParts
from grove.supervisor.errors import SupervisorError
from grove.supervisor.eventlog import EventLog
from grove.supervisor.holding import TreeHolding
from grove.supervisor.prefixes import SharedPrefixes
from grove.supervisor.store.records import AgentRecord
from grove.supervisor.supervision import RestartIntensity
from grove.supervisor.turns import LiveAgent

if TYPE_CHECKING:
    from grove.supervisor.advisor_desk import AdvisorDesk
    from grove.supervisor.fork_cache import ForkCaches


class CoreState:
    """The core's state, made from its parts. The single writer of the store; plain asyncio
    (the Ray actor around it supplies the hosts); tokens never pass through here."""

    # Desks that take the whole core, made by `SupervisorCore` (supervisor/core/__init__.py).
    fork_caches: ForkCaches  # warm-ups before fan-out, explicit entries
    budgets: BudgetGuard
    advisors: AdvisorDesk | None  # None: this supervisor runs no reviewers

    def __init__(self, parts: CoreParts) -> None:
        if not parts.hosts:
            raise SupervisorError("a supervisor needs at least one host")
        self.store = parts.store
        self.event_log = EventLog(parts.store)
        self.billing = InFlightBilling()  # requests billed by turns not stored yet
        self.hosts = dict(parts.hosts)
        self._spawn_host = parts.spawn_host
        self.prefixes = SharedPrefixes(parts.share)
        self.limits = parts.limits
        self.restart_policy = parts.restart_policy
        self._intensity: dict[str, RestartIntensity] = {}
        self.given_up: set[str] = set()  # hosts that died too often to restart again
        self._forked_keys: dict[tuple[str, str], AgentRecord] | None = None
        self.compaction = parts.compaction
        self.cache = parts.cache
        self.tracing = parts.tracing
        self.workspaces = parts.workspaces
        self._background: set[asyncio.Task[None]] = set()
        self._live: dict[str, LiveAgent] = {}
        # Agents made here (roots, forked children): no turn of theirs was cut off.
        self._created: set[str] = set()
        self._load: dict[str, int] = dict.fromkeys(self.hosts, 0)
        self._session_locks: dict[str, asyncio.Lock] = {}
        # The trees this Grove holds, as the store tells every reader.
        self.holding = TreeHolding(parts.store, parts.holder, self.event)

    def event(self, kind: str, **payload: Any) -> None:
        self.event_log.record(kind, payload)

    def session_lock(self, root_uuid: str) -> asyncio.Lock:
        lock = self._session_locks.get(root_uuid)
        if lock is None:
            lock = self._session_locks[root_uuid] = asyncio.Lock()
        return lock

    def background(self, work: Coroutine[Any, Any, None]) -> None:
        """Run `work` as a task this core owns (kept until done, never silently lost)."""
        task = asyncio.get_running_loop().create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background_done)

    def _background_done(self, task: asyncio.Task[None]) -> None:
        self._background.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self.event("BackgroundFailed", error=repr(task.exception()))
