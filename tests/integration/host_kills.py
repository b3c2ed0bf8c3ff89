"""Helpers for the tests that kill Grove's hosts: the kill, the store events that follow it, and
waiting for every child of a batch as the batch runner does.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Sequence

from grove.actors.turn_result import TurnResult
from grove.supervisor import Grove
from grove.supervisor.host_deaths import NOTICE
from grove.supervisor.store import Store
from grove.supervisor.store.kinds import SPENT_KIND
from grove.supervisor.store.records import MessageRecord


def events(store: Store, kind: str) -> list[dict[str, object]]:
    return [e.payload for e in store.events(limit=100_000) if e.kind == kind]


def conversation(store: Store, agent: str) -> list[MessageRecord]:
    """An agent's stored messages without the `spent` records a request cut off by a kill
    leaves for its bill (SPEC section 14: billed once, counted once)."""
    return [m for m in store.agent_messages(agent) if m.kind != SPENT_KIND]


def kill_host(grove: Grove, host_id: str) -> None:
    os.kill(grove.host_pids()[host_id], signal.SIGKILL)


def host_died_index(deltas: Sequence[tuple[str, str]]) -> int | None:
    """Where a streamed turn's notice of its host's death is among its deltas (None: none)."""
    return next(
        (
            index
            for index, (kind, text) in enumerate(deltas)
            if kind == NOTICE and text.startswith("the agent's host died")
        ),
        None,
    )


def wait_for_event(store: Store, kind: str, count: int, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while len(events(store, kind)) < count:
        assert time.monotonic() < deadline, f"fewer than {count} {kind} events"
        time.sleep(0.1)


def finish_all(grove: Grove, children: list[str]) -> dict[str, TurnResult | None]:
    """Wait for every child with `wait_any`, as the batch runner does; each one's result."""
    pending: set[str] = set(children)
    results: dict[str, TurnResult | None] = {}
    while pending:
        done = grove.wait_any(sorted(pending), 120)
        assert done, "children stopped finishing"
        results.update(done)
        pending -= done.keys()
    return results
