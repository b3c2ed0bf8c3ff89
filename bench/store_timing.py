"""Benchmark: what the store's hot writes and waits cost against the bare database under them,
measured in the same run (the timings the store tests used to bound in wall-clock time).

- `fork_write`: `SqliteStore.create_agents` of one forked child with its prompt, against one
  transaction inserting two rows of the same sizes on a bare sqlite3 connection to a file of
  its own in the same directory, WAL and synchronous=NORMAL as the store sets them. The two
  alternate write by write.
- `lease_beside_held`: taking and dropping a session's lease while another session's lease is
  held, against the same with nothing held (a held lease must not slow another session down),
  on SQLite and on a private redis-server.

Reported: medians in microseconds and their ratios. Prints one JSON line. Run from the
repository root: `python bench/store_timing.py --n 2000`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness import redis_server

from grove.supervisor.store import AgentRecord, NewMessage, SqliteStore, Store, open_store

PROMPT = "task {number}: " + "context " * 20
BARE_SCHEMA = (
    "CREATE TABLE agents (uuid TEXT PRIMARY KEY, parent TEXT, record TEXT)",
    "CREATE TABLE messages (id INTEGER PRIMARY KEY, agent TEXT, kind TEXT, content TEXT)",
)


def median_us(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1e6, 1)


def child_of(root: str) -> AgentRecord:
    return AgentRecord(
        uuid=str(uuid.uuid4()),
        role="child",
        parent_uuid=root,
        fork_message_id=1,
        provider="openai",
        model="gpt-5-mini",
        created_at=time.time(),
    )


def bare_database(path: Path) -> Callable[[int], None]:
    """One write of the baseline: a child's row and its prompt in one transaction."""
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("PRAGMA journal_mode = WAL")
    connection.execute("PRAGMA synchronous = NORMAL")
    for statement in BARE_SCHEMA:
        connection.execute(statement)

    def write(number: int) -> None:
        child = child_of("root")
        connection.execute("BEGIN IMMEDIATE")
        connection.execute(
            "INSERT INTO agents VALUES (?, ?, ?)",
            (child.uuid, "root", json.dumps({"role": child.role, "model": child.model})),
        )
        connection.execute(
            "INSERT INTO messages (agent, kind, content) VALUES (?, 'user', ?)",
            (child.uuid, PROMPT.format(number=number)),
        )
        connection.execute("COMMIT")

    return write


def fork_writes(directory: Path, n: int) -> dict[str, Any]:
    store = SqliteStore(directory / "grove.sqlite3")
    root = AgentRecord(uuid=str(uuid.uuid4()), role="root", created_at=time.time())
    store.create_agents([root])
    store.append_message(root.uuid, "user", "shared context")
    bare = bare_database(directory / "bare.sqlite3")
    forks: list[float] = []
    inserts: list[float] = []
    for number in range(n):
        child = child_of(root.uuid)
        prompt = NewMessage(
            agent_uuid=child.uuid, kind="user", content=PROMPT.format(number=number)
        )
        started = time.perf_counter()
        store.create_agents([child], [prompt])
        forks.append(time.perf_counter() - started)
        started = time.perf_counter()
        bare(number)
        inserts.append(time.perf_counter() - started)
    store.close()
    fork_us, bare_us = median_us(forks), median_us(inserts)
    return {
        "fork_write_us": fork_us,
        "bare_insert_us": bare_us,
        "ratio": round(fork_us / bare_us, 2),
    }


async def lease_round_trips(store: Store, n: int, held: str | None) -> list[float]:
    """Take and drop session b's lease `n` times, `held` session's lease held meanwhile."""

    async def take() -> list[float]:
        took = []
        for _ in range(n):
            started = time.perf_counter()
            async with store.lease("session-b", timeout_s=10.0):
                pass
            took.append(time.perf_counter() - started)
        return took

    if held is None:
        return await take()
    async with store.lease(held, timeout_s=10.0):
        return await take()


def leases(url: str, n: int) -> dict[str, Any]:
    store = open_store(url)
    try:
        beside: list[float] = []
        alone: list[float] = []
        for _ in range(10):  # alternating rounds
            beside += asyncio.run(lease_round_trips(store, n // 10, "session-a"))
            alone += asyncio.run(lease_round_trips(store, n // 10, None))
    finally:
        store.close()
    beside_us, alone_us = median_us(beside), median_us(alone)
    return {
        "beside_held_us": beside_us,
        "alone_us": alone_us,
        "ratio": round(beside_us / alone_us, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="writes and leases of each kind")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="grove-bench-store-") as workdir:
        directory = Path(workdir)
        fork = fork_writes(directory, args.n)
        sqlite_leases = leases(f"sqlite:///{directory / 'leases.sqlite3'}", args.n)
    with redis_server() as url:
        redis_leases = leases(f"{url}?namespace=bench-{uuid.uuid4().hex}", args.n)
    report = {
        "bench": "store_timing",
        "n": args.n,
        "fork_write": fork,
        "lease_beside_held": {"sqlite": sqlite_leases, "redis": redis_leases},
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
