"""`Placement`: where each agent runs (its live state, placed on a host on first use) and
whether it has a turn in flight. Nothing here starts a turn.
"""

from __future__ import annotations

import asyncio

from grove.actors.contract import HostAPI
from grove.supervisor.core.parts import ISOLATION_PROCESS
from grove.supervisor.core.tree import AgentTree
from grove.supervisor.errors import SupervisorError
from grove.supervisor.store.records import AgentRecord
from grove.supervisor.turns import LiveAgent


class Placement(AgentTree):
    """Agents' live state and hosts: least-loaded shared hosts, or one of an agent's own."""

    def live(self, uuid: str, record: AgentRecord | None = None) -> LiveAgent:
        """An agent's live state; placing it on first use (least-loaded shared host, or a
        host of its own for `isolation = "process"`). `record`, when the caller holds it,
        spares a store read."""
        state = self._live.get(uuid)
        if state is None:
            record = record or self.store.get_agent(uuid)
            host_id, host = self._place(uuid, record)
            state = self._live[uuid] = LiveAgent(host_id=host_id, host=host)
            state.turn_done.set()
            if record is not None:
                self.hold(record)
        return state

    def _place(self, uuid: str, record: AgentRecord | None) -> tuple[str, HostAPI]:
        if record is not None and record.metadata.get("isolation") == ISOLATION_PROCESS:
            if self._spawn_host is None:
                raise SupervisorError("this supervisor cannot start hosts of their own")
            return self._spawn_host(uuid)
        usable = [host_id for host_id in self.hosts if host_id not in self.given_up]
        if not usable:
            raise SupervisorError("every agent host has failed; see `grove events`")
        host_id = min(usable, key=lambda known: self._load[known])
        self._load[host_id] += 1
        return host_id, self.hosts[host_id]

    def in_flight(self, uuid: str) -> bool:
        """Whether the agent has a turn in flight: on its host, or between hosts until it
        resumes."""
        state = self._live.get(uuid)
        return state is not None and not state.turn_done.is_set()

    def turns_in_flight(self) -> int:
        """How many agents have a turn in flight (as `in_flight` says of one)."""
        return sum(not state.turn_done.is_set() for state in self._live.values())

    def streaming(self, uuid: str) -> bool:
        state = self._live.get(uuid)
        return state is not None and state.ticket_id is not None

    def turn_end(self, uuid: str) -> asyncio.Event | None:
        """What is set when the agent's turn in flight (or its retry) ends; None: it has none."""
        state = self._live.get(uuid)
        return None if state is None or state.turn_done.is_set() else state.turn_done
