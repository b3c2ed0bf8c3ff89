"""Session lease tickets of a Redis store: the queue that lease.py waits on, as keys with a
TTL plus one sorted set per session. Nothing else lives here.
"""

from __future__ import annotations

from grove.supervisor.store.redis_connection import RedisConnection
from grove.supervisor.store.redis_keys import RedisKeys
from grove.supervisor.store.redis_scripts import LEASE_HEAD, LEASE_TAKE


class RedisLeaseQueue:
    """Lease tickets as keys with a TTL plus one sorted set per session; an expired key is a
    dead holder's ticket. Expiry is the server's clock, so machines need not agree on time."""

    def __init__(self, conn: RedisConnection, keys: RedisKeys, ttl_s: float) -> None:
        self._conn = conn
        self._keys = keys
        self.ttl_s = ttl_s

    def take(self, session_id: str) -> tuple[int, int | None]:
        keys = [self._keys.lease_queue(session_id), self._keys.lease_seq]
        prefix = self._keys.lease_ticket_prefix(session_id)
        ticket, head = self._conn.run("take a lease ticket", LEASE_TAKE, keys, prefix, self._ttl_ms)
        return int(ticket), int(head)

    def renew(self, session_id: str, ticket: int) -> bool:
        key = f"{self._keys.lease_ticket_prefix(session_id)}{ticket}"
        with self._conn.mapped("renew a lease ticket"):
            return bool(self._conn.client.pexpire(key, self._ttl_ms))

    def head(self, session_id: str) -> int | None:
        keys = [self._keys.lease_queue(session_id)]
        prefix = self._keys.lease_ticket_prefix(session_id)
        head = self._conn.run("read the lease queue", LEASE_HEAD, keys, prefix)
        return None if head is None else int(head)

    def release(self, session_id: str, ticket: int) -> None:
        with self._conn.mapped("release a lease ticket"):
            pipe = self._conn.client.pipeline(transaction=True)
            pipe.delete(f"{self._keys.lease_ticket_prefix(session_id)}{ticket}")
            pipe.zrem(self._keys.lease_queue(session_id), str(ticket))
            pipe.execute()

    @property
    def _ttl_ms(self) -> int:
        return max(1, int(self.ttl_s * 1000))
