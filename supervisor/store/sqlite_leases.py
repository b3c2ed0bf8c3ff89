"""Session lease tickets of a SQLite store, one row each: the queue that lease.py waits on.
A row whose expires_at has passed is a dead holder's ticket; nothing else lives here.
"""

from __future__ import annotations

import time

from grove.supervisor.store.sqlite_db import SqliteDatabase

_LEASE_HEAD = "SELECT MIN(ticket) FROM lease_tickets WHERE session_id = ? AND expires_at > ?"
# A take reads the queue's head in the statement that inserts its ticket: whether or not the
# subquery sees the new row, the head is the smaller of the two.
_LEASE_TAKE = (
    "INSERT INTO lease_tickets (session_id, expires_at) VALUES (?, ?) RETURNING ticket, "
    "(SELECT MIN(queued.ticket) FROM lease_tickets AS queued "
    "WHERE queued.session_id = ? AND queued.expires_at > ?)"
)


class SqliteLeaseQueue:
    """Lease tickets as rows; a row whose expires_at has passed is a dead holder's ticket."""

    def __init__(self, db: SqliteDatabase, ttl_s: float) -> None:
        self._db = db
        self.ttl_s = ttl_s

    # Taking and releasing are one statement each, so each is a transaction of its own: no
    # BEGIN and COMMIT around it.
    def take(self, session_id: str) -> tuple[int, int | None]:
        now = time.time()
        ((ticket, older),) = self._db.query(
            "take a lease ticket", _LEASE_TAKE, (session_id, now + self.ttl_s, session_id, now)
        )
        return int(ticket), int(ticket) if older is None else min(int(older), int(ticket))

    def renew(self, session_id: str, ticket: int) -> bool:
        now = time.time()
        with self._db.transaction("renew a lease ticket") as conn:
            cursor = conn.execute(
                "UPDATE lease_tickets SET expires_at = ? "
                "WHERE ticket = ? AND session_id = ? AND expires_at > ?",
                (now + self.ttl_s, ticket, session_id, now),
            )
            return cursor.rowcount == 1

    def head(self, session_id: str) -> int | None:
        rows = self._db.query("read the lease queue", _LEASE_HEAD, (session_id, time.time()))
        return None if rows[0][0] is None else int(rows[0][0])

    def release(self, session_id: str, ticket: int) -> None:
        """Removes the ticket, and the session's dead ones with it (`head` skips those)."""
        self._db.query(
            "release a lease ticket",
            "DELETE FROM lease_tickets WHERE session_id = ? AND (ticket = ? OR expires_at <= ?)",
            (session_id, ticket, time.time()),
        )
