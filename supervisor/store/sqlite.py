"""`SqliteStore`: Grove's default store, one SQLite file in WAL mode shared by every process.

Durability: WAL with synchronous=NORMAL. A commit is in the WAL file (the OS page cache) when
the call returns, so it survives the writing process being killed at any moment; only a power
loss or kernel crash can drop the last commits. Only SQL and row decoding live here.
"""

from __future__ import annotations

import math
import os
import sqlite3
import threading
import time
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

from grove.supervisor.errors import StoreError
from grove.supervisor.store.base import (
    DEFAULT_LEASE_POLL_S,
    DEFAULT_LEASE_TTL_S,
    DEFAULT_MAX_MESSAGE_BYTES,
)
from grove.supervisor.store.codec import decode_json, encode_json, validate_record
from grove.supervisor.store.core import StoreCore, read_or_note
from grove.supervisor.store.lease import LeaseQueue
from grove.supervisor.store.records import AgentRecord, EventRecord, MessageRecord
from grove.supervisor.store.write_checks import PreparedEvent, PreparedMessage, ticketed

SCHEMA_VERSION = 1
EVENT_POLL_S = 0.02

_SCHEMA = """
CREATE TABLE IF NOT EXISTS agents (
    uuid TEXT PRIMARY KEY,
    name TEXT,
    parent_uuid TEXT REFERENCES agents(uuid),
    role TEXT NOT NULL,
    watched_uuid TEXT REFERENCES agents(uuid),
    fork_message_id INTEGER NOT NULL,
    provider TEXT,
    model TEXT,
    thinking_level TEXT,
    status TEXT NOT NULL,
    created_at REAL NOT NULL,
    ended_at REAL,
    metadata TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS agents_by_parent ON agents(parent_uuid);
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    agent_uuid TEXT NOT NULL REFERENCES agents(uuid),
    kind TEXT NOT NULL,
    content TEXT NOT NULL,
    data TEXT NOT NULL,
    created_at REAL NOT NULL,
    ticket TEXT UNIQUE
);
CREATE INDEX IF NOT EXISTS messages_by_agent ON messages(agent_uuid, id);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    payload TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS focus (
    root_uuid TEXT PRIMARY KEY REFERENCES agents(uuid),
    agent_uuid TEXT NOT NULL REFERENCES agents(uuid)
);
CREATE TABLE IF NOT EXISTS lease_tickets (
    ticket INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    expires_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS lease_tickets_by_session ON lease_tickets(session_id, ticket);
"""
# Made in any store that lacks them (they came after schema version 1; older Groves ignore them).
_HOLDER_SCHEMA = """
CREATE TABLE IF NOT EXISTS holders (
    holder TEXT PRIMARY KEY,
    expires_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS tree_holds (
    root_uuid TEXT PRIMARY KEY,
    holder TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS tree_holds_by_holder ON tree_holds(holder);
"""

_AGENT_COLUMNS = (
    "uuid",
    "name",
    "parent_uuid",
    "role",
    "watched_uuid",
    "fork_message_id",
    "provider",
    "model",
    "thinking_level",
    "status",
    "created_at",
    "ended_at",
    "metadata",
)
_AGENT_SELECT = f"SELECT {', '.join(_AGENT_COLUMNS)} FROM agents"
_AGENT_INSERT = (
    f"INSERT INTO agents ({', '.join(_AGENT_COLUMNS)}) "
    f"VALUES ({', '.join('?' for _ in _AGENT_COLUMNS)})"
)
_AGENT_UPDATE = (
    f"UPDATE agents SET {', '.join(f'{c} = ?' for c in _AGENT_COLUMNS[1:])} WHERE uuid = ?"
)
_MESSAGE_COLUMNS = ("id", "agent_uuid", "kind", "content", "data", "created_at", "ticket")
_MESSAGE_SELECT = f"SELECT {', '.join(_MESSAGE_COLUMNS)} FROM messages"
_LEASE_HEAD = "SELECT MIN(ticket) FROM lease_tickets WHERE session_id = ? AND expires_at > ?"
# Values bound into one `IN (...)` list, well under SQLite's limit on bound parameters.
_IN_CHUNK = 500
# Upper bound for a prefix range scan: above every character an agent id may hold.
_PREFIX_END = "\U0010ffff"


class _Database:
    """One connection, one lock, and the one place sqlite3 errors become StoreError."""

    def __init__(self, path: Path, busy_timeout_s: float) -> None:
        self.path = path
        self.lock = threading.RLock()
        with self.mapped("open"):
            self.conn = sqlite3.connect(
                path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False
            )

    @contextmanager
    def mapped(self, action: str) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as exc:
            raise StoreError(f"SQLite store {self.path}: {action} failed: {exc}") from exc

    @contextmanager
    def transaction(self, action: str) -> Iterator[sqlite3.Connection]:
        """BEGIN IMMEDIATE ... COMMIT; any error rolls back, so nothing is written."""
        with self.lock, self.mapped(action):
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield self.conn
                self.conn.execute("COMMIT")
            except BaseException:
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                raise

    def query(self, action: str, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        with self.lock, self.mapped(action):
            return self.conn.execute(sql, params).fetchall()


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
        target = Path(path).expanduser()
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            # Conversations are private: a new file (and so its -wal and -shm) is owner-only.
            os.close(os.open(target, os.O_CREAT | os.O_WRONLY, 0o600))
        except OSError as exc:
            raise StoreError(f"Cannot create SQLite store {target}: {exc}") from exc
        self._db = _Database(target, busy_timeout_s)
        self._leases = _SqliteLeaseQueue(self._db, lease_ttl_s)
        try:
            self._open_schema(busy_timeout_s)
        except StoreError:
            self._db.conn.close()
            raise

    def _open_schema(self, busy_timeout_s: float) -> None:
        db = self._db
        with db.lock, db.mapped("open"):
            db.conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
            mode = db.conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise StoreError(f"SQLite store {db.path}: cannot switch to WAL mode ({mode})")
            db.conn.execute("PRAGMA synchronous = NORMAL")
            db.conn.execute("PRAGMA foreign_keys = ON")
        with db.transaction("create the schema") as conn:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version == 0:
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            elif version != SCHEMA_VERSION:
                raise StoreError(
                    f"SQLite store {db.path} has schema version {version}; this Grove reads "
                    f"version {SCHEMA_VERSION}"
                )
            for statement in _HOLDER_SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)

    @property
    def _lease_queue(self) -> LeaseQueue:
        return self._leases

    def close(self) -> None:
        with self._db.lock, self._db.mapped("close"):
            self._db.conn.close()

    # ----- agents ---------------------------------------------------------------------------

    def get_agent(self, uuid: str) -> AgentRecord | None:
        rows = self._db.query("read an agent", f"{_AGENT_SELECT} WHERE uuid = ?", (uuid,))
        return _agent(rows[0]) if rows else None

    def get_agents(self, uuids: Collection[str]) -> dict[str, AgentRecord]:
        rows = self._in_chunks("read agents", f"{_AGENT_SELECT} WHERE uuid IN ({{}})", uuids)
        return {record.uuid: record for record in map(_agent, rows)}

    def list_agents(
        self, include_ended: bool = False, *, unreadable: list[str] | None = None
    ) -> list[AgentRecord]:
        where = "" if include_ended else " WHERE status = 'running'"
        rows = self._db.query("list agents", f"{_AGENT_SELECT}{where} ORDER BY created_at, uuid")
        read = (read_or_note(partial(_agent, row), unreadable) for row in rows)
        return [record for record in read if record is not None]

    def children(self, uuid: str, created_since: float | None = None) -> list[AgentRecord]:
        rows = self._db.query(
            "list children",
            f"{_AGENT_SELECT} WHERE parent_uuid = ? AND created_at >= ? ORDER BY created_at, uuid",
            (uuid, -math.inf if created_since is None else created_since),
        )
        return [_agent(row) for row in rows]

    def _agents_with_prefix(self, prefix: str, limit: int) -> list[AgentRecord]:
        rows = self._db.query(
            "resolve an agent prefix",
            f"{_AGENT_SELECT} WHERE uuid >= ? AND uuid < ? ORDER BY uuid LIMIT ?",
            (prefix, prefix + _PREFIX_END, limit),
        )
        return [_agent(row) for row in rows]

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
        values = _agent_row(record)
        with self._db.transaction("update an agent") as conn:
            conn.execute(_AGENT_UPDATE, (*values[1:], values[0]))

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
        results: list[MessageRecord] = []
        with self._db.transaction("write agents and messages") as conn:
            conn.executemany(_AGENT_INSERT, [_agent_row(record) for record in records])
            for item in messages:
                message = item.message
                if message.ticket is not None:
                    prior = conn.execute(
                        f"{_MESSAGE_SELECT} WHERE ticket = ?", (message.ticket,)
                    ).fetchall()
                    if prior:
                        results.append(ticketed(_message(prior[0]), message.agent_uuid))
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
            f"{_MESSAGE_SELECT} WHERE agent_uuid = ? AND id > ?{upper} ORDER BY id",
            params,
        )
        return [_message(row) for row in rows]

    def newest_messages(self, uuid: str, count: int) -> list[MessageRecord]:
        if count < 1:
            return []
        rows = self._db.query(
            "read messages",
            f"{_MESSAGE_SELECT} WHERE agent_uuid = ? ORDER BY id DESC LIMIT ?",
            (uuid, count),
        )
        return [_message(row) for row in reversed(rows)]

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
        with self._db.transaction("append events") as conn:
            return [
                conn.execute(
                    "INSERT INTO events (kind, payload, created_at) VALUES (?, ?, ?) RETURNING id",
                    (event.kind, event.payload_json, event.created_at),
                ).fetchone()[0]
                for event in events
            ]

    def events(self, after_id: int = 0, limit: int = 1000) -> list[EventRecord]:
        rows = self._db.query(
            "read events",
            "SELECT id, kind, payload, created_at FROM events WHERE id > ? ORDER BY id LIMIT ?",
            (after_id, limit),
        )
        return [_event(row) for row in rows]

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
        return {_text(row[0], "holder") for row in rows}

    def tree_holders(self) -> dict[str, str]:
        rows = self._db.query(
            "read the held trees",
            "SELECT t.root_uuid, t.holder FROM tree_holds t JOIN holders h ON h.holder = t.holder "
            "WHERE h.expires_at > ?",
            (time.time(),),
        )
        return {_text(root, "held root"): _text(holder, "holder") for root, holder in rows}


class _SqliteLeaseQueue:
    """Lease tickets as rows; a row whose expires_at has passed is a dead holder's ticket."""

    def __init__(self, db: _Database, ttl_s: float) -> None:
        self._db = db
        self.ttl_s = ttl_s

    def take(self, session_id: str) -> tuple[int, int | None]:
        now = time.time()
        with self._db.transaction("take a lease ticket") as conn:
            conn.execute(
                "DELETE FROM lease_tickets WHERE session_id = ? AND expires_at <= ?",
                (session_id, now),
            )
            (ticket,) = conn.execute(
                "INSERT INTO lease_tickets (session_id, expires_at) VALUES (?, ?) RETURNING ticket",
                (session_id, now + self.ttl_s),
            ).fetchone()
            (head,) = conn.execute(_LEASE_HEAD, (session_id, now)).fetchone()
        return int(ticket), int(head)

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
        with self._db.transaction("release a lease ticket") as conn:
            conn.execute(
                "DELETE FROM lease_tickets WHERE ticket = ? AND session_id = ?",
                (ticket, session_id),
            )


def _agent_row(record: AgentRecord) -> tuple[Any, ...]:
    values = record.model_dump()
    values["metadata"] = encode_json(record.metadata, f"Metadata of agent {record.uuid}")
    return tuple(values[column] for column in _AGENT_COLUMNS)


def _agent(row: Sequence[Any]) -> AgentRecord:
    fields = dict(zip(_AGENT_COLUMNS, row, strict=True))
    what = f"agent record {_label(fields['uuid'])}"
    fields["metadata"] = decode_json(fields["metadata"], what)
    return validate_record(AgentRecord, fields, what)


def _message(row: Sequence[Any]) -> MessageRecord:
    fields = dict(zip(_MESSAGE_COLUMNS, row, strict=True))
    what = f"message record {_label(fields['id'])}"
    fields["data"] = decode_json(fields["data"], what)
    return validate_record(MessageRecord, fields, what)


def _event(row: Sequence[Any]) -> EventRecord:
    fields = dict(zip(("id", "kind", "payload", "created_at"), row, strict=True))
    what = f"event record {_label(fields['id'])}"
    fields["payload"] = decode_json(fields["payload"], what)
    return validate_record(EventRecord, fields, what)


def _label(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _text(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise StoreError(f"Corrupted {what} in the store: {_label(value)}")
    return value
