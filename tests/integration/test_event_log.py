"""The supervisor's EventLog on a real SQLite file: one write per command, nothing reordered,
and a command that waits shows in the log while it waits."""

from __future__ import annotations

import asyncio
import contextvars
from pathlib import Path

import pytest

from grove.supervisor.eventlog import EventLog
from grove.supervisor.store.sqlite import SqliteStore


def kinds(store: SqliteStore) -> list[str]:
    return [event.kind for event in store.events()]


async def test_a_batch_reaches_the_store_in_one_write_when_it_ends(tmp_path: Path) -> None:
    writer, reader = SqliteStore(tmp_path / "g.db"), SqliteStore(tmp_path / "g.db")
    log = EventLog(writer)
    with log.batched():
        log.record("CommandDispatched", {"name": "fork"})
        log.record("AgentForked", {"agent": "a"})
        assert kinds(reader) == []
    assert kinds(reader) == ["CommandDispatched", "AgentForked"]
    ids = [event.id for event in reader.events()]
    assert ids[1] == ids[0] + 1
    log.record("AgentKilled", {"agent": "a"})  # outside a batch: at once
    assert kinds(reader)[-1] == "AgentKilled"


async def test_a_waiting_command_shows_in_the_log_while_it_waits(tmp_path: Path) -> None:
    writer, reader = SqliteStore(tmp_path / "g.db"), SqliteStore(tmp_path / "g.db")
    log = EventLog(writer)
    release = asyncio.Event()

    async def waiting_command() -> None:
        with log.batched():
            log.record("CommandDispatched", {"name": "wait"})
            await release.wait()
            log.record("CommandResulted", {"name": "wait"})

    task = asyncio.create_task(waiting_command())
    await asyncio.sleep(0.05)
    assert kinds(reader) == ["CommandDispatched"]
    release.set()
    await task
    assert kinds(reader) == ["CommandDispatched", "CommandResulted"]


async def test_an_event_outside_the_batch_keeps_its_place_after_earlier_ones(
    tmp_path: Path,
) -> None:
    writer, reader = SqliteStore(tmp_path / "g.db"), SqliteStore(tmp_path / "g.db")
    log = EventLog(writer)
    with log.batched():
        log.record("CommandDispatched", {"name": "fork"})
        # Another task's event, recorded while this batch waits: both go out, in order.
        contextvars.Context().run(log.record, "TurnCompleted", {"agent": "b"})
        assert kinds(reader) == ["CommandDispatched", "TurnCompleted"]
        log.record("CommandResulted", {"name": "fork"})
    assert kinds(reader) == ["CommandDispatched", "TurnCompleted", "CommandResulted"]


async def test_a_failed_loop_step_write_is_logged_not_raised_into_the_loop(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    writer = SqliteStore(tmp_path / "g.db")
    log = EventLog(writer)
    with log.batched():
        log.record("CommandDispatched", {"name": "wait"})
        writer.close()
        await asyncio.sleep(0.01)  # the loop step's flush runs and fails
    assert "Events of a running command were not written: SQLite store" in caplog.text


def test_a_batch_outside_any_event_loop_is_written_when_it_ends(tmp_path: Path) -> None:
    writer, reader = SqliteStore(tmp_path / "g.db"), SqliteStore(tmp_path / "g.db")
    log = EventLog(writer)
    with log.batched():
        log.record("TurnCompleted", {"agent": "a"})
        log.record("TurnCompleted", {"agent": "b"})
        assert kinds(reader) == []
    assert kinds(reader) == ["TurnCompleted", "TurnCompleted"]
