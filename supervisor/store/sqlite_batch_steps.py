"""The steps on the batch tier of a SQLite store: one row each, its record as JSON, in a table
made in any store that lacks it (older Groves ignore it).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from grove.supervisor.store.batch_steps import BatchStepRecord, encoded_steps, stored_step
from grove.supervisor.store.sqlite_db import SqliteDatabase

_SCHEMA = "CREATE TABLE IF NOT EXISTS batch_steps (step TEXT PRIMARY KEY, body TEXT NOT NULL)"


class SqliteBatchSteps:
    """`BatchStepBook` on one SQLite file."""

    def __init__(self, db: SqliteDatabase) -> None:
        self._db = db
        with db.transaction("make the batch steps' table") as conn:
            conn.execute(_SCHEMA)

    def put(self, records: Sequence[BatchStepRecord]) -> None:
        rows = list(encoded_steps(records).items())
        with self._db.transaction("store batch steps") as conn:
            conn.executemany(
                "INSERT INTO batch_steps (step, body) VALUES (?, ?) "
                "ON CONFLICT (step) DO UPDATE SET body = excluded.body",
                rows,
            )

    def drop(self, steps: Collection[str]) -> None:
        with self._db.transaction("drop batch steps") as conn:
            conn.executemany("DELETE FROM batch_steps WHERE step = ?", [(s,) for s in steps])

    def all(self) -> list[BatchStepRecord]:
        rows = self._db.query(
            "read batch steps", "SELECT step, body FROM batch_steps ORDER BY step"
        )
        return [stored_step(body, str(step)) for step, body in rows]
