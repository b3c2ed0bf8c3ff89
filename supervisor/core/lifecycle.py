"""`Lifecycle`: the supervisor's life around its core: the core and its desks built from their
parts, the background loops started on the first call, hosts pinged and flushed, trees let go.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable, Collection
from typing import Any, Protocol

from grove.providers.errors import GroveError
from grove.supervisor.approvals import ApprovalDesk
from grove.supervisor.budget import BudgetDesk
from grove.supervisor.core import SupervisorCore
from grove.supervisor.core.parts import CoreParts
from grove.supervisor.errors import StoreError, SupervisorError
from grove.supervisor.fleet import FleetLimiter, ProviderLimits
from grove.supervisor.holding import HOLDER_RENEW_S, unheld_agents
from grove.supervisor.tiers.desk import TierDesk


class HostRoster(Protocol):
    """The hosts as the supervisor's life sees them (supervisor/ray_hosts.py's `RayHosts`)."""

    def handle(self, host_id: str) -> Any: ...

    async def pings(self) -> list[dict[str, Any]]: ...

    async def pids(self, given_up: Collection[str]) -> dict[str, int]: ...

    async def flush_telemetry(self, given_up: Collection[str]) -> None: ...

    async def watch(
        self, given_up: Collection[str], slow: Callable[[str, BaseException], None]
    ) -> None: ...


class Lifecycle:
    """The core, its desks (budgets, reviewers, approvals, the fleet's rate limits, the
    collectors of provider batches) and the hosts. `restarted` says whether this process runs
    a supervisor that was restarted under it: its first call then recovers the turns the one
    before left in flight. Whichever supervisor it follows, it polls the provider batches
    that one left open."""

    def __init__(
        self,
        parts: CoreParts,
        hosts: HostRoster,
        rate_limits: dict[str, ProviderLimits],
        restarted: Callable[[], bool],
    ) -> None:
        self.hosts = hosts
        self._restarted = restarted

        def budget_desk(core: SupervisorCore) -> BudgetDesk:
            self.budgets = BudgetDesk(core)
            return self.budgets

        self.core = SupervisorCore(parts, budgets=budget_desk)
        if self.core.advisors is None:
            raise SupervisorError("the supervisor needs its reviewers' plan (CoreParts.advisor)")
        self.advisors = self.core.advisors
        self.fleet = FleetLimiter(rate_limits)
        self.approvals = ApprovalDesk(self.core)
        self.tiers = TierDesk(parts.store, parts.batch, self.core.event)
        self.core.holding.renew()
        self._monitor: asyncio.Task[None] | None = None
        self._holding: asyncio.Task[None] | None = None

    def _wake(self) -> None:
        """Start what runs in the background once the event loop is there (it is not when
        this is built): host supervision and, after a restart, recovery from the store."""
        if self._monitor is None:
            loop = asyncio.get_running_loop()
            self._monitor = loop.create_task(self.hosts.watch(self.core.given_up, self._slow))
            self._holding = loop.create_task(self._keep_holding())
            self._resume_batches()  # before the turns that wait on them ask again
            if self._restarted():
                restarted = self.core.recover()
                self.core.event("SupervisorStarted", pid=os.getpid(), turns_restarted=restarted)

    def _resume_batches(self) -> None:
        """The provider batches a supervisor before this one left open, polled again."""
        store, holder = self.core.store, self.core.holding.holder
        try:
            self.tiers.resume(lambda: [record.uuid for record in unheld_agents(store, holder)])
        except GroveError as exc:  # their turns send them again
            self.core.event("BatchesNotResumed", error=str(exc))

    def _slow(self, host_id: str, error: BaseException) -> None:
        self.core.event("HostSlow", host=host_id, error=repr(error))

    async def _keep_holding(self) -> None:
        """Every few seconds, tell the store this Grove lives on (a store that cannot be
        reached is asked again next time; the event log says why)."""
        holding = self.core.holding
        while True:
            await asyncio.sleep(HOLDER_RENEW_S)
            try:
                holding.renew()
            except StoreError as exc:
                with contextlib.suppress(StoreError):
                    self.core.event("HolderNotRenewed", holder=holding.holder, error=str(exc))

    async def let_go(self) -> None:
        """The Grove ends: the trees it held show `stopped` at once."""
        if self._holding is not None:
            self._holding.cancel()
        self.core.holding.let_go()

    async def ready(self) -> dict[str, Any]:
        self._wake()
        return {"pid": os.getpid(), "hosts": await self.hosts.pings()}

    def host(self, host_id: str) -> Any:
        return self.hosts.handle(host_id)

    async def flush_telemetry(self) -> None:
        """Export the spans every live host and this supervisor have ended (before Grove
        stops them: a killed process's spans in waiting would be lost)."""
        await self.hosts.flush_telemetry(self.core.given_up)
        await asyncio.to_thread(self.core.tracing.flush)

    async def host_pids(self) -> dict[str, int]:
        """For operators and tests: the process id of each live host."""
        self._wake()
        return await self.hosts.pids(self.core.given_up)
