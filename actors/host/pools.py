"""A host's idle connection pools: an agent between turns keeps its provider's pool until it
has been idle `idle_release_s`, or until more than `idle_pools` idle agents hold one.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable

from grove.actors.agent.turn_loop import Agent

DEFAULT_IDLE_RELEASE_S = 120.0
# Agents of a host that may keep an idle connection pool open; beyond it, the least recently
# used let go of theirs (each holds a socket here and one at the provider).
DEFAULT_IDLE_POOLS = 512

# The agent by uuid when it is held and no turn of it runs now (None otherwise).
IdleAgent = Callable[[str], Agent | None]


class IdlePools:
    """Agents holding a pool between turns, least recently used first."""

    def __init__(self, idle_agent: IdleAgent, idle_release_s: float, idle_pools: int) -> None:
        self._idle_agent = idle_agent
        self.idle_release_s = idle_release_s
        self.idle_pools = idle_pools
        self._last_used: dict[str, float] = {}
        self._janitor: asyncio.Task[None] | None = None

    def used(self, uuid: str) -> None:
        """The agent's turn ended now: it holds its pool, the most recently used."""
        self._last_used.pop(uuid, None)
        self._last_used[uuid] = time.monotonic()

    def forget(self, uuid: str) -> None:
        self._last_used.pop(uuid, None)

    def keep_releasing(self) -> None:
        """Start the idle-release loop on the running event loop, once (a Ray actor's loop is
        not there yet when it is built)."""
        if self._janitor is None:
            self._janitor = asyncio.get_running_loop().create_task(self._release_idle_forever())

    async def _release_idle_forever(self) -> None:
        interval = max(self.idle_release_s / 4, 0.05)
        while True:
            await asyncio.sleep(interval)
            await self.release_idle()

    async def release_idle(self, now: float | None = None) -> int:
        """Release connection pools of agents idle longer than `idle_release_s`."""
        now = time.monotonic() if now is None else now
        released = 0
        for uuid, last in list(self._last_used.items()):
            if now - last >= self.idle_release_s:
                released += await self._release_pool(uuid)
        return released

    async def release_least_recent(self) -> int:
        """Release the pools of the least recently used idle agents beyond `idle_pools`."""
        released, beyond = 0, len(self._last_used) - self.idle_pools
        for uuid in list(itertools.islice(self._last_used, max(0, beyond))):
            released += await self._release_pool(uuid)
        return released

    async def _release_pool(self, uuid: str) -> bool:
        """Close an agent's pool unless a turn of its runs now (or it is no longer held)."""
        agent = self._idle_agent(uuid)
        if agent is None or uuid not in self._last_used:
            return False
        del self._last_used[uuid]
        await agent.release_connections()
        return True
