"""The steps on the batch tier of a Redis store: one hash of the namespace, step -> its record
as JSON.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from grove.supervisor.store.batch_steps import BatchStepRecord, encoded_steps, stored_step
from grove.supervisor.store.redis_connection import RedisConnection
from grove.supervisor.store.redis_values import reply_text


class RedisBatchSteps:
    """`BatchStepBook` in the hash `key` of one Redis server."""

    def __init__(self, conn: RedisConnection, key: str) -> None:
        self._conn = conn
        self._key = key

    def put(self, records: Sequence[BatchStepRecord]) -> None:
        bodies = encoded_steps(records)
        if bodies:
            with self._conn.mapped("store batch steps"):
                self._conn.client.hset(self._key, mapping=dict(bodies.items()))

    def drop(self, steps: Collection[str]) -> None:
        if steps:
            with self._conn.mapped("drop batch steps"):
                self._conn.client.hdel(self._key, *steps)

    def all(self) -> list[BatchStepRecord]:
        with self._conn.mapped("read batch steps"):
            raw = self._conn.client.hgetall(self._key)
        steps = {reply_text(step, "batch step"): body for step, body in raw.items()}
        return [stored_step(steps[step], step) for step in sorted(steps)]
