"""Session leases: a FIFO ticket lock per root session, shared across processes and machines.

Each store keeps the queue (a SQLite table, Redis keys with a TTL); the waiting, renewing and
releasing, the store's only async code, lives here. Nothing else may wait on a lease queue.
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Protocol

from grove.supervisor.errors import StoreError, SupervisorError

logger = logging.getLogger(__name__)

# A live ticket is renewed this many times per TTL, so one late renewal does not lose it.
RENEWALS_PER_TTL = 3


class LeaseQueue(Protocol):
    """One store's lease tickets. A ticket not renewed within `ttl_s` counts as dead."""

    ttl_s: float

    def take(self, session_id: str) -> tuple[int, int | None]:
        """Enqueue a new live ticket at the back of the session's queue; return it and the
        queue's head right after (what `head` would say)."""
        ...

    def renew(self, session_id: str, ticket: int) -> bool:
        """Extend a ticket's life; False when it had already expired (its place is lost)."""
        ...

    def head(self, session_id: str) -> int | None:
        """The oldest live ticket of the session (dead ones are skipped), None when empty."""
        ...

    def release(self, session_id: str, ticket: int) -> None:
        """Remove a ticket; the next live one becomes the head."""
        ...


@dataclass(frozen=True, kw_only=True)
class Lease:
    """Proof of holding a session's lease, valid until the `async with` block ends."""

    session_id: str
    ticket: int


class HeldLease(AbstractAsyncContextManager[Lease]):
    """Waits (at most `timeout_s`) for the session's lease in FIFO order, holds it, releases
    it. While held, a timer renews the ticket (no task: a lease taken at once, as most are,
    costs its queue's take and release and nothing more)."""

    def __init__(self, queue: LeaseQueue, session_id: str, timeout_s: float, poll_s: float) -> None:
        self._queue = queue
        self._session_id = session_id
        self._timeout_s = timeout_s
        self._poll_s = poll_s
        self._ticket: int | None = None
        self._renewal: asyncio.TimerHandle | None = None

    async def __aenter__(self) -> Lease:
        queue, session_id = self._queue, self._session_id
        if not session_id:
            raise SupervisorError("A lease needs a session id")
        ticket, head = queue.take(session_id)
        try:
            if head != ticket:
                await _wait_for_turn(queue, session_id, ticket, self._timeout_s, self._poll_s)
        except BaseException:
            queue.release(session_id, ticket)
            raise
        self._ticket = ticket
        self._renew_later()
        return Lease(session_id=session_id, ticket=ticket)

    async def __aexit__(self, *exc_info: object) -> None:
        # Cancelled first, so the ticket cannot be renewed after the release below.
        if self._renewal is not None:
            self._renewal.cancel()
        if self._ticket is not None:
            self._queue.release(self._session_id, self._ticket)

    def _renew_later(self) -> None:
        loop = asyncio.get_running_loop()
        self._renewal = loop.call_later(self._queue.ttl_s / RENEWALS_PER_TTL, self._renew)

    def _renew(self) -> None:
        """Renew the held ticket, again and again until released; a failed renewal is logged,
        never fatal."""
        assert self._ticket is not None
        try:
            alive = self._queue.renew(self._session_id, self._ticket)
        except StoreError as exc:
            logger.warning("Could not renew the lease on session %s: %s", self._session_id, exc)
            alive = True  # tried again at the next renewal
        if not alive:
            logger.warning("%s", _lost_text(self._session_id))
            return
        self._renew_later()


async def _wait_for_turn(
    queue: LeaseQueue, session_id: str, ticket: int, timeout_s: float, poll_s: float
) -> None:
    loop = asyncio.get_running_loop()
    renew_every = queue.ttl_s / RENEWALS_PER_TTL
    deadline = loop.time() + timeout_s
    renew_due = loop.time() + renew_every
    while True:
        head = queue.head(session_id)
        if head == ticket:
            return
        if head is None or head > ticket:
            raise SupervisorError(_lost_text(session_id))
        now = loop.time()
        if now >= deadline:
            raise SupervisorError(
                f"Timed out after {timeout_s:g} s waiting for the lease on session {session_id}"
            )
        if now >= renew_due:
            if not queue.renew(session_id, ticket):
                raise SupervisorError(_lost_text(session_id))
            renew_due = now + renew_every
        await asyncio.sleep(min(poll_s, deadline - now))


def _lost_text(session_id: str) -> str:
    return (
        f"Lost the lease ticket of session {session_id}: it was not renewed within its TTL "
        "and the queue moved past it"
    )
