"""`SqliteStore`: Grove's default store, one SQLite file shared by every process; its queries
only (the file and schema are sqlite_db.py's, rows sqlite_rows.py's, leases sqlite_leases.py's).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Collection, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from grove.supervisor.errors import StoreError
from grove.supervisor.store.base import (
    DEFAULT_LEASE_POLL_S,
    DEFAULT_LEASE_TTL_S,
    DEFAULT_MAX_MESSAGE_BYTES,
)
from grove.supervisor.store.batch_steps import BatchStepBook
from grove.supervisor.store.core import StoreCore, read_or_note
from grove.supervisor.store.lease import LeaseQueue
from grove.supervisor.store.records import AgentRecord, EventRecord, MessageRecord
from grove.supervisor.store.sqlite_batch_steps import SqliteBatchSteps
from grove.supervisor.store.sqlite_db import SqliteDatabase
from grove.supervisor.store.sqlite_leases import SqliteLeaseQueue
from grove.supervisor.store.sqlite_rows import (
    AGENT_INSERT,
    AGENT_SELECT,
    AGENT_UPDATE,
    MESSAGE_SELECT,
    agent_from_row,
    agent_row,
    event_from_row,
    message_from_row,
    stored_text,
)
from grove.supervisor.store.write_checks import PreparedEvent, PreparedMessage, ticketed

EVENT_POLL_S = 0.02
# Values bound into one `IN (...)` list, well under SQLite's limit on bound parameters.
_IN_CHUNK = 500
_EVENTS_AT_ONCE = 300  # rows of one INSERT: 900 values, under any SQLite's limit
# Upper bound for a prefix range scan: above every character an agent id may hold.
_PREFIX_END = "\U0010ffff"


class SqliteStore(StoreCore):
    """The Store on one SQLite file; several processes may open the same file at once."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        lease_ttl_s: float = DEFAULT_LEASE_TTL_S,
        lease_poll_s: float = DEFAULT_LEASE_POLL_S,
        busy_timeout_s: float = 5.0,
    ) -> None:
        super().__init__(max_message_bytes=max_message_bytes, lease_poll_s=lease_poll_s)
        self._db = SqliteDatabase(Path(path).expanduser(), busy_timeout_s)
        self._leases = SqliteLeaseQueue(self._db, lease_ttl_s)
        self.batch_steps: BatchStepBook = SqliteBatchSteps(self._db)

    @property
    def _lease_queue(self) -> LeaseQueue:
        return self._leases

    def close(self) -> None:
        self._db.close()

    # ----- agents ---------------------------------------------------------------------------

    def get_agent(self, uuid: str) -> AgentRecord | None:
        rows = self._db.query("read an agent", f"{AGENT_SELECT} WHERE uuid = ?", (uuid,))
        return agent_from_row(rows[0]) if rows else None

    def get_agents(self, uuids: Collection[str]) -> dict[str, AgentRecord]:
        rows = self._in_chunks("read agents", f"{AGENT_SELECT} WHERE uuid IN ({{}})", uuids)
        return {record.uuid: record for record in map(agent_from_row, rows)}

    def list_agents(
        self, include_ended: bool = False, *, unreadable: list[str] | None = None
    ) -> list[AgentRecord]:
        where = "" if include_ended else " WHERE status = 'running'"
        rows = self._db.query("list agents", f"{AGENT_SELECT}{where} ORDER BY created_at, uuid")
        read = (read_or_note(partial(agent_from_row, row), unreadable) for row in rows)
        return [record for record in read if record is not None]

    def children(self, uuid: str, created_since: float | None = None) -> list[AgentRecord]:
        rows = self._db.query(
            "list children",
            f"{AGENT_SELECT} WHERE parent_uuid = ? AND created_at >= ? ORDER BY created_at, uuid",
            (uuid, -math.inf if created_since is None else created_since),
        )
        return [agent_from_row(row) for row in rows]

    def _agents_with_prefix(self, prefix: str, limit: int) -> list[AgentRecord]:
        rows = self._db.query(
            "resolve an agent prefix",
            f"{AGENT_SELECT} WHERE uuid >= ? AND uuid < ? ORDER BY uuid LIMIT ?",
            (prefix, prefix + _PREFIX_END, limit),
        )
        return [agent_from_row(row) for row in rows]

    def _existing_agent_ids(self, uuids: Collection[str]) -> set[str]:
        sql = "SELECT uuid FROM agents WHERE uuid IN ({})"
        rows = self._in_chunks("look up agents", sql, uuids)
        return {row[0] for row in rows}

    def message_counts(self, uuids: Collection[str]) -> dict[str, int]:
        sql = "SELECT agent_uuid, COUNT(*) FROM messages WHERE agent_uuid IN ({}) GROUP BY 1"
        rows = self._in_chunks("count messages", sql, uuids)
        return {uuid: 0 for uuid in uuids} | {row[0]: int(row[1]) for row in rows}

    def _in_chunks(self, action: str, sql: str, values: Collection[str]) -> list[Any]:
        """Rows of `sql` whose `IN ({})` is filled with `values`, `_IN_CHUNK` at a time."""
        wanted = list(values)
        rows: list[Any] = []
        for start in range(0, len(wanted), _IN_CHUNK):
            chunk = wanted[start : start + _IN_CHUNK]
            marks = ", ".join("?" for _ in chunk)
            rows.extend(self._db.query(action, sql.format(marks), chunk))
        return rows

    def _replace_agent(self, record: AgentRecord) -> None:
        values = agent_row(record)
        with self._db.transaction("update an agent") as conn:
            conn.execute(AGENT_UPDATE, (*values[1:], values[0]))

    def _write_focus(self, root_uuid: str, agent_uuid: str) -> None:
        with self._db.transaction("set the focus") as conn:
            conn.execute(
                "INSERT INTO focus (root_uuid, agent_uuid) VALUES (?, ?) "
                "ON CONFLICT (root_uuid) DO UPDATE SET agent_uuid = excluded.agent_uuid",
                (root_uuid, agent_uuid),
            )

    def get_focus(self, root_uuid: str) -> str | None:
        rows = self._db.query(
            "read the focus", "SELECT agent_uuid FROM focus WHERE root_uuid = ?", (root_uuid,)
        )
        if not rows:
            return None
        if not isinstance(rows[0][0], str):
            raise StoreError(f"Corrupted focus of session {root_uuid} in the store")
        return rows[0][0]

    # ----- messages -------------------------------------------------------------------------

    def _write(
        self, records: Sequence[AgentRecord], messages: Sequence[PreparedMessage]
    ) -> list[MessageRecord]:
        if len(records) == 1 and not messages:  # one statement is a transaction of its own
            self._db.query("write an agent", AGENT_INSERT, agent_row(records[0]))
            return []
        results: list[MessageRecord] = []
        with self._db.transaction("write agents and messages") as conn:
            conn.executemany(AGENT_INSERT, [agent_row(record) for record in records])
            for item in messages:
                message = item.message
                if message.ticket is not None:
                    prior = conn.execute(
                        f"{MESSAGE_SELECT} WHERE ticket = ?", (message.ticket,)
                    ).fetchall()
                    if prior:
                        results.append(ticketed(message_from_row(prior[0]), message.agent_uuid))
                        continue
                inserted = conn.execute(
                    "INSERT INTO messages (agent_uuid, kind, content, data, created_at, ticket) "
                    "VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
                    (
                        message.agent_uuid,
                        message.kind,
                        message.content,
                        item.data_json,
                        item.created_at,
                        message.ticket,
                    ),
                ).fetchone()
                results.append(item.record(inserted[0]))
        return results

    def agent_messages(
        self, uuid: str, after_id: int = 0, up_to_id: int | None = None
    ) -> list[MessageRecord]:
        upper = "" if up_to_id is None else " AND id <= ?"
        params: tuple[Any, ...] = (
            (uuid, after_id) if up_to_id is None else (uuid, after_id, up_to_id)
        )
        rows = self._db.query(
            "read messages",
            f"{MESSAGE_SELECT} WHERE agent_uuid = ? AND id > ?{upper} ORDER BY id",
            params,
        )
        return [message_from_row(row) for row in rows]

    def newest_messages(self, uuid: str, count: int) -> list[MessageRecord]:
        if count < 1:
            return []
        rows = self._db.query(
            "read messages",
            f"{MESSAGE_SELECT} WHERE agent_uuid = ? ORDER BY id DESC LIMIT ?",
            (uuid, count),
        )
        return [message_from_row(row) for row in reversed(rows)]

    def _last_own_message(self, uuid: str, up_to_id: int | None) -> tuple[int, str] | None:
        upper = "" if up_to_id is None else " AND id <= ?"
        params: tuple[Any, ...] = (uuid,) if up_to_id is None else (uuid, up_to_id)
        rows = self._db.query(
            "read the last message",
            f"SELECT id, kind FROM messages WHERE agent_uuid = ?{upper} ORDER BY id DESC LIMIT 1",
            params,
        )
        return (int(rows[0][0]), str(rows[0][1])) if rows else None

    def last_message_id(self) -> int:
        rows = self._db.query("read the last message id", "SELECT MAX(id) FROM messages")
        return int(rows[0][0] or 0)

    # ----- events ---------------------------------------------------------------------------

    def _write_events(self, events: Sequence[PreparedEvent]) -> list[int]:
        """One INSERT of many rows (a transaction of its own); more than `_EVENTS_AT_ONCE`
        events, several in one transaction."""
        chunks = [
            events[at : at + _EVENTS_AT_ONCE] for at in range(0, len(events), _EVENTS_AT_ONCE)
        ]
        if len(chunks) == 1:
            return self._insert_events(chunks[0])
        with self._db.transaction("append events"):
            return [event_id for chunk in chunks for event_id in self._insert_events(chunk)]

    def _insert_events(self, events: Sequence[PreparedEvent]) -> list[int]:
        rows = ", ".join(["(?, ?, ?)"] * len(events))
        values = [value for e in events for value in (e.kind, e.payload_json, e.created_at)]
        inserted = self._db.query(
            "append events",
            f"INSERT INTO events (kind, payload, created_at) VALUES {rows} RETURNING id",
            values,
        )
        # One statement took the ids in the rows' order; RETURNING need not list them so.
        return sorted(int(row[0]) for row in inserted)

    def events(self, after_id: int = 0, limit: int = 1000) -> list[EventRecord]:
        rows = self._db.query(
            "read events",
            "SELECT id, kind, payload, created_at FROM events WHERE id > ? ORDER BY id LIMIT ?",
            (after_id, limit),
        )
        return [event_from_row(row) for row in rows]

    def last_event_id(self) -> int:
        rows = self._db.query(
            "read the last event id", "SELECT seq FROM sqlite_sequence WHERE name = 'events'"
        )
        return int(rows[0][0]) if rows else 0

    def trim_events(self, before: float) -> int:
        with self._db.transaction("trim events") as conn:
            removed: int = conn.execute(
                "DELETE FROM events WHERE created_at < ?", (before,)
            ).rowcount
        return removed

    def wait_events(self, after_id: int, timeout_s: float, limit: int = 1000) -> list[EventRecord]:
        deadline = time.monotonic() + timeout_s
        while True:
            found = self.events(after_id, limit)
            remaining = deadline - time.monotonic()
            if found or remaining <= 0:
                return found
            time.sleep(min(EVENT_POLL_S, remaining))

    # ----- holders --------------------------------------------------------------------------

    def _renew_holder(self, holder: str, ttl_s: float) -> bool:
        now = time.time()
        with self._db.transaction("renew a holder") as conn:
            alive = conn.execute(
                "SELECT 1 FROM holders WHERE holder = ? AND expires_at > ?", (holder, now)
            ).fetchone()
            expired = "SELECT holder FROM holders WHERE expires_at <= ?"
            conn.execute(f"DELETE FROM tree_holds WHERE holder IN ({expired})", (now,))
            conn.execute("DELETE FROM holders WHERE expires_at <= ?", (now,))
            conn.execute(
                "INSERT INTO holders (holder, expires_at) VALUES (?, ?) "
                "ON CONFLICT (holder) DO UPDATE SET expires_at = excluded.expires_at",
                (holder, now + ttl_s),
            )
        return alive is not None

    def _drop_holder(self, holder: str) -> None:
        with self._db.transaction("drop a holder") as conn:
            conn.execute("DELETE FROM tree_holds WHERE holder = ?", (holder,))
            conn.execute("DELETE FROM holders WHERE holder = ?", (holder,))

    def _hold_trees(self, holder: str, roots: Sequence[str]) -> None:
        with self._db.transaction("hold trees") as conn:
            conn.executemany(
                "INSERT INTO tree_holds (root_uuid, holder) VALUES (?, ?) "
                "ON CONFLICT (root_uuid) DO UPDATE SET holder = excluded.holder",
                [(root, holder) for root in roots],
            )

    def live_holders(self) -> set[str]:
        rows = self._db.query(
            "read the holders", "SELECT holder FROM holders WHERE expires_at > ?", (time.time(),)
        )
        return {stored_text(row[0], "holder") for row in rows}

    def tree_holders(self) -> dict[str, str]:
        rows = self._db.query(
            "read the held trees",
            "SELECT t.root_uuid, t.holder FROM tree_holds t JOIN holders h ON h.holder = t.holder "
            "WHERE h.expires_at > ?",
            (time.time(),),
        )
        return {
            stored_text(root, "held root"): stored_text(holder, "holder") for root, holder in rows
        }
