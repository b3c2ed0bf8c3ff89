"""One SQLite store file: its schema, its connection and lock, and the one place sqlite3 errors
become StoreError. WAL with synchronous=NORMAL: a commit survives its process being killed.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from grove.supervisor.errors import StoreError

SCHEMA_VERSION = 1

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


class SqliteDatabase:
    """One connection, one lock, and the one place sqlite3 errors become StoreError."""

    def __init__(self, path: Path, busy_timeout_s: float) -> None:
        """Open (or create, owner-only) the file at `path` and make sure it holds the schema."""
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            # Conversations are private: a new file (and so its -wal and -shm) is owner-only.
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
        except OSError as exc:
            raise StoreError(f"Cannot create SQLite store {path}: {exc}") from exc
        self.path = path
        self.lock = threading.RLock()
        with self.mapped("open"):
            self.conn = sqlite3.connect(
                path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False
            )
        try:
            self._open_schema(busy_timeout_s)
        except StoreError:
            self.conn.close()
            raise

    @contextmanager
    def mapped(self, action: str) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as exc:
            raise self.failed(action, exc) from exc

    def failed(self, action: str, exc: sqlite3.Error) -> StoreError:
        return StoreError(f"SQLite store {self.path}: {action} failed: {exc}")

    # The two below map errors themselves rather than through `mapped`: they run several times
    # a command, each with one context manager less.
    @contextmanager
    def transaction(self, action: str) -> Iterator[sqlite3.Connection]:
        """BEGIN IMMEDIATE ... COMMIT; any error rolls back, so nothing is written."""
        with self.lock:
            try:
                self.conn.execute("BEGIN IMMEDIATE")
                try:
                    yield self.conn
                    self.conn.execute("COMMIT")
                except BaseException:
                    if self.conn.in_transaction:
                        self.conn.execute("ROLLBACK")
                    raise
            except sqlite3.Error as exc:
                raise self.failed(action, exc) from exc

    def query(self, action: str, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """The rows of one statement, run as a transaction of its own (a write commits)."""
        with self.lock:
            try:
                return self.conn.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise self.failed(action, exc) from exc

    def close(self) -> None:
        with self.lock, self.mapped("close"):
            self.conn.close()

    def _open_schema(self, busy_timeout_s: float) -> None:
        with self.lock, self.mapped("open"):
            self.conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
            mode = self.conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise StoreError(f"SQLite store {self.path}: cannot switch to WAL mode ({mode})")
            self.conn.execute("PRAGMA synchronous = NORMAL")
            self.conn.execute("PRAGMA foreign_keys = ON")
        with self.transaction("create the schema") as conn:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version == 0:
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            elif version != SCHEMA_VERSION:
                raise StoreError(
                    f"SQLite store {self.path} has schema version {version}; this Grove reads "
                    f"version {SCHEMA_VERSION}"
                )
            for statement in _HOLDER_SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
