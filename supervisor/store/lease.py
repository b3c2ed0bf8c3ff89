"""Session leases: a FIFO ticket lock per root session, shared across processes and machines.

Each store keeps the queue (a SQLite table, Redis keys with a TTL); the waiting, renewing and
releasing, the store's only async code, lives here. Nothing else may wait on a lease queue.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
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


@asynccontextmanager
async def hold_lease(
    queue: LeaseQueue, session_id: str, timeout_s: float, poll_s: float
) -> AsyncIterator[Lease]:
    """Wait (at most `timeout_s`) for the session's lease in FIFO order, hold it, release it."""
    if not session_id:
        raise SupervisorError("A lease needs a session id")
    ticket, head = queue.take(session_id)
    keep_alive: asyncio.Task[None] | None = None
    try:
        if head != ticket:
            await _wait_for_turn(queue, session_id, ticket, timeout_s, poll_s)
        keep_alive = asyncio.create_task(_keep_alive(queue, session_id, ticket))
        yield Lease(session_id=session_id, ticket=ticket)
    finally:
        # The task is parked in asyncio.sleep, so it cannot renew after the release below.
        if keep_alive is not None:
            keep_alive.cancel()
        queue.release(session_id, ticket)


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


async def _keep_alive(queue: LeaseQueue, session_id: str, ticket: int) -> None:
    """Renew the held ticket until cancelled; a failed renewal is logged, never fatal."""
    while True:
        await asyncio.sleep(queue.ttl_s / RENEWALS_PER_TTL)
        try:
            alive = queue.renew(session_id, ticket)
        except StoreError as exc:
            logger.warning("Could not renew the lease on session %s: %s", session_id, exc)
            continue
        if not alive:
            logger.warning("%s", _lost_text(session_id))
            return


def _lost_text(session_id: str) -> str:
    return (
        f"Lost the lease ticket of session {session_id}: it was not renewed within its TTL "
        "and the queue moved past it"
    )
