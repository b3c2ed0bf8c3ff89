"""What the requests of turns in flight were billed, as their hosts report it: an estimate just
before each request (or a retry of it) is sent, its exact bill when it ends, or that it failed
unbilled. Dropped once the turn is stored (its messages carry the usage), stored as `spent`
messages when the turn is lost with its host (a request sent and not answered yet at its
estimate), so a request is counted once even if its turn runs again.
"""

from __future__ import annotations

from typing import Any

from grove.actors.agent.estimates import ESTIMATED, UNBILLED
from grove.supervisor.store.base import SPENT_KIND
from grove.supervisor.store.records import NewMessage


class InFlightBilling:
    """Requests billed, by the ticket of the turn that made them."""

    def __init__(self) -> None:
        self._pending: dict[str, list[tuple[str, dict[str, Any]]]] = {}
        # The request each turn has sent and not heard the end of (a turn sends one at a
        # time): its estimated bill, until its own bill replaces it.
        self._open: dict[str, tuple[str, dict[str, Any]]] = {}
        # Replies stored as steps before their host told what they were billed (the two
        # travel apart): not to be kept when that word comes.
        self._stored_early: dict[str, list[dict[str, Any]]] = {}

    def seen(self, ticket_id: str, agent: str, data: dict[str, Any]) -> None:
        """A request is about to be sent (`data` is its estimate), failed unbilled, or
        ended."""
        if data.get(ESTIMATED):  # the one before it ended, billed or not
            self._open[ticket_id] = (agent, data)
            return
        self._open.pop(ticket_id, None)
        if data.get(UNBILLED):
            return
        early = self._stored_early.get(ticket_id)
        if early and data in early:
            early.remove(data)
            return
        self._pending.setdefault(ticket_id, []).append((agent, data))

    def step_stored(self, ticket_id: str, data: dict[str, Any]) -> None:
        """A reply of a turn in flight is stored as a step (`data`: its stored data without
        its parts): what it was billed is in that message."""
        self._open.pop(ticket_id, None)
        pending = self._pending.get(ticket_id, [])
        for index, (_, billed) in enumerate(pending):
            if billed == data:
                del pending[index]
                return
        self._stored_early.setdefault(ticket_id, []).append(data)

    def stored(self, ticket_id: str) -> None:
        """The turn is stored: what it was billed is in its messages."""
        self._pending.pop(ticket_id, None)
        self._open.pop(ticket_id, None)
        self._stored_early.pop(ticket_id, None)

    def lost(self, ticket_id: str) -> list[NewMessage]:
        """The turn's host died before it was stored: its billed requests, as messages, the
        one it had sent and not heard the end of last, at its estimate (marked `estimated`)."""
        self._stored_early.pop(ticket_id, None)
        billed = self._pending.pop(ticket_id, [])
        sent = self._open.pop(ticket_id, None)
        if sent is not None:
            billed.append(sent)
        return [spent_message(agent, data) for agent, data in billed]


def spent_message(agent: str, data: dict[str, Any]) -> NewMessage:
    """A request `agent` was billed for whose reply is not in its conversation."""
    return NewMessage(agent_uuid=agent, kind=SPENT_KIND, content="", data=data)
