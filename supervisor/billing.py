"""What the requests of turns in flight were billed, as their hosts report it when each request
ends: dropped once the turn is stored (its messages carry the usage), stored as `spent`
messages when the turn is lost with its host, so a reply is counted once even if its turn runs
again.
"""

from __future__ import annotations

from typing import Any

from supervisor.store.base import SPENT_KIND
from supervisor.store.records import NewMessage


class InFlightBilling:
    """Requests billed, by the ticket of the turn that made them."""

    def __init__(self) -> None:
        self._pending: dict[str, list[tuple[str, dict[str, Any]]]] = {}

    def seen(self, ticket_id: str, agent: str, data: dict[str, Any]) -> None:
        self._pending.setdefault(ticket_id, []).append((agent, data))

    def stored(self, ticket_id: str) -> None:
        """The turn is stored: what it was billed is in its messages."""
        self._pending.pop(ticket_id, None)

    def lost(self, ticket_id: str) -> list[NewMessage]:
        """The turn's host died before it was stored: its billed requests, as messages."""
        return [spent_message(agent, data) for agent, data in self._pending.pop(ticket_id, [])]


def spent_message(agent: str, data: dict[str, Any]) -> NewMessage:
    """A request `agent` was billed for whose reply is not in its conversation."""
    return NewMessage(agent_uuid=agent, kind=SPENT_KIND, content="", data=data)
