"""Hostile inputs, each one clear error that changes nothing else: stored records of the wrong
type or carrying a pickle, oversized and non-UTF-8 prompts, control characters, bad task lines.

Covered elsewhere: path escapes through the read-only tools (tests/unit/test_readonly_tools.py),
a wrong Redis password (test_security.py, test_store_backends.py), each malformed task line's
message (tests/unit/test_batch_input.py).
"""

from __future__ import annotations

import json
import os
import pickle
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from grove.supervisor import Grove
from grove.supervisor.batch.tasks import MAX_TEXT_BYTES
from grove.supervisor.errors import StoreError
from grove.supervisor.store import AgentRecord, SqliteStore, Store, open_store
from tests.integration.groves import invoke
from tests.integration.test_batch_cli import Workspace, make_workspace

RUN_TIMEOUT_S = 240
STORE_LIMIT = "the store's limit of 4,194,304 bytes; nothing was written"
CONTROL = "\x1b[31mred\x1b[0m \x07bell \rreturn \ttab \x7fdel \x85nel \x9bcsi \u202ertl \ufeffbom"
pytestmark = pytest.mark.grove(hosts=1)  # the Grove of the prompts through the Python API


def grove_cli(work: Workspace, *args: str | bytes) -> subprocess.CompletedProcess[str]:
    """`grove ARGS` in a process of its own: arguments may be bytes, as a shell passes them."""
    return subprocess.run(
        [sys.executable, "-m", "grove.cli.app", *args],
        capture_output=True,
        text=True,
        env=work.env,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )


# ----- stored records of the wrong type ------------------------------------------------------


def _dump(path: Path) -> list[tuple[Any, ...]]:
    """Every row of every table, to show that reading changed nothing."""
    with sqlite3.connect(path) as connection:
        tables = [row[0] for row in connection.execute("SELECT name FROM sqlite_master")]
        rows = [
            (table, *row)
            for table in sorted(tables)
            if not table.startswith("sqlite_") and "_by_" not in table
            for row in connection.execute(f"SELECT * FROM {table}")
        ]
    connection.close()
    return rows


@pytest.fixture
def damaged(tmp_path: Path) -> Iterator[Workspace]:
    """A store with two healthy agents (one with a child) and one whose row was rewritten
    behind the store's back with values of the wrong types."""
    work = make_workspace(tmp_path)
    store = SqliteStore(tmp_path / "g.sqlite3")
    store.create_agents([AgentRecord(uuid="aaaa1111", role="root", created_at=1.0)])
    store.append_message("aaaa1111", "user", "shared context")
    child = AgentRecord(
        uuid="aaaa2222", role="child", parent_uuid="aaaa1111", fork_message_id=1, created_at=2.0
    )
    store.create_agents([child, AgentRecord(uuid="bbbb3333", role="root", created_at=3.0)])
    store.append_message("aaaa2222", "user", "the child's task")
    store.append_message("bbbb3333", "user", "the damaged agent's prompt")
    store.close()
    with sqlite3.connect(tmp_path / "g.sqlite3") as connection:
        connection.execute(
            "UPDATE agents SET fork_message_id = 'many', created_at = 'yesterday', "
            "metadata = '[1, 2]' WHERE uuid = 'bbbb3333'"
        )
    connection.close()
    yield work


BAD_AGENT = (
    "Corrupted agent record 'bbbb3333' in the store: fork_message_id: Input should be a valid "
    "integer; created_at: Input should be a valid number; metadata: Input should be a valid "
    "dictionary\n"
)


def test_a_record_of_the_wrong_types_is_named_by_agents_and_history(damaged: Workspace) -> None:
    """A record the store cannot read is named in one precise line, no traceback: `agents`
    still lists every healthy record, `history` of that agent is refused; every healthy
    record still reads, and nothing is changed by trying."""
    before = _dump(damaged.base / "g.sqlite3")
    healthy = (
        "aaaa1111  root  stopped  no model  1 message\n"
        "  aaaa2222  child  stopped  no model  1 message\n"
    )
    for args in (["agents"], ["agents", "--all"]):
        done = invoke(damaged.env, *args)
        skipped = f"Skipped an unreadable agent record: {BAD_AGENT}"
        assert (done.returncode, done.stdout, done.stderr) == (1, healthy, skipped), args
    for args in (["history", "bbbb3333"], ["history", "bbbb"]):
        done = invoke(damaged.env, *args)
        assert (done.returncode, done.stdout, done.stderr) == (1, "", BAD_AGENT), args
    child = invoke(damaged.env, "history", "aaaa2222")
    assert child.returncode == 0, child.stderr
    assert child.stdout == (
        "Agent aaaa2222\n[1] user  from aaaa1111\nshared context\n\n[2] user\nthe child's task\n\n"
    )
    assert _dump(damaged.base / "g.sqlite3") == before


class _Trap:
    """Unpickling this creates a file: proof that stored bytes were unpickled."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (Path.touch, (self.marker,))


def test_pickled_bytes_in_the_store_are_never_unpickled(tmp_path: Path) -> None:
    work = make_workspace(tmp_path)
    store = SqliteStore(tmp_path / "g.sqlite3")
    store.create_agents([AgentRecord(uuid="cccc4444", role="root", created_at=1.0)])
    store.append_message("cccc4444", "user", "hello")
    store.append_event("AgentCreated", {"agent": "cccc4444"})
    store.close()
    marker = tmp_path / "unpickled"
    payload = pickle.dumps(_Trap(marker))
    pickle.loads(payload)  # the trap works: unpickling it does create the file
    assert marker.exists()
    marker.unlink()
    with sqlite3.connect(tmp_path / "g.sqlite3") as connection:
        connection.execute("UPDATE agents SET metadata = ?", (payload,))
        connection.execute("UPDATE messages SET data = ?", (payload,))
        connection.execute("UPDATE events SET payload = ?", (payload,))
    connection.close()
    expected = {
        "agents": "Skipped an unreadable agent record: Corrupted agent record 'cccc4444' in "
        "the store: not valid JSON\n",
        "history": "Corrupted agent record 'cccc4444' in the store: not valid JSON\n",
        "events": "Corrupted event record 1 in the store: not valid JSON\n",
    }
    for command, error in expected.items():
        done = invoke(work.env, command, *(["cccc4444"] if command == "history" else []))
        assert (done.returncode, done.stderr) == (1, error), command
    assert not marker.exists()


# ----- prompts through the Python API --------------------------------------------------------


def assert_still_answers(grove: Grove, store: Store, agent: str) -> None:
    result = grove.ask(agent, "[[sim reply='still here']] are you there?", timeout_s=120)
    assert (result.error, result.text) == (None, "still here")
    assert [m.content for m in store.agent_messages(agent)][-1] == "still here"


def test_an_oversized_prompt_is_refused_and_nothing_is_stored(grove: Grove, store: Store) -> None:
    root = grove.create_root("claude-haiku-4-5")
    last = store.last_message_id()
    with pytest.raises(StoreError, match=rf"^Message of [\d,]+ bytes exceeds {STORE_LIMIT}$"):
        grove.send(root.uuid, "x" * (4 * 1024 * 1024 + 1))
    assert store.last_message_id() == last
    assert store.agent_messages(root.uuid) == []
    assert_still_answers(grove, store, root.uuid)


def test_a_prompt_with_an_unpaired_surrogate_is_refused(grove: Grove, store: Store) -> None:
    root = grove.create_root("claude-haiku-4-5")
    last = store.last_message_id()
    with pytest.raises(StoreError) as refused:
        grove.send(root.uuid, "review \ud800 this")
    assert str(refused.value) == (
        "Message content contains an unpaired surrogate (\\ud800), not valid UTF-8; "
        "nothing was written"
    )
    assert store.last_message_id() == last
    assert_still_answers(grove, store, root.uuid)


def test_a_system_prompt_with_an_unpaired_surrogate_creates_no_agent(
    grove: Grove, store: Store
) -> None:
    agents = store.list_agents(include_ended=True)
    with pytest.raises(StoreError, match=r"^Metadata of agent \S+ contains an unpaired surrogate"):
        grove.create_root("claude-haiku-4-5", system="be \udcff terse")
    assert store.list_agents(include_ended=True) == agents


def test_control_characters_reach_the_store_exactly(grove: Grove, store: Store) -> None:
    root = grove.create_root("claude-haiku-4-5")
    prompt = "\x00nul \x01soh " + CONTROL
    result = grove.ask(root.uuid, prompt, timeout_s=120)
    assert result.error is None and result.text
    first = store.agent_messages(root.uuid)[0]
    assert (first.kind, first.content) == ("user", prompt)


# ----- prompts through `grove run` -----------------------------------------------------------


def test_grove_run_refuses_bytes_that_are_not_utf8_before_starting_anything(
    tmp_path: Path,
) -> None:
    work = make_workspace(tmp_path)
    model = ("--simulate", "--model", "claude-haiku-4-5")
    started = time.monotonic()
    done = grove_cli(work, "run", *model, b"review \xff\xfe this")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "The prompt is not valid UTF-8: byte 0xff at character 8\n"
    done = grove_cli(work, "run", *model, "--system", b"caf\xc3", "review this")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "The --system text is not valid UTF-8: byte 0xc3 at character 4\n"
    assert time.monotonic() - started < 30  # no Ray, no simulator
    assert not (tmp_path / "g.sqlite3").exists()


def test_grove_run_passes_control_characters_through_intact(
    grove: Grove, store_url: str, tmp_path: Path
) -> None:
    """In this process, on the module's Grove (the command joins its supervisor)."""
    work = make_workspace(tmp_path, store_url=store_url)
    done = invoke(work.env, "run", "--simulate", "--model", "claude-haiku-4-5", "--json", CONTROL)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    (line,) = done.stdout.splitlines()
    document = json.loads(line)
    assert document["text"]
    store = open_store(work.store_url)
    try:
        assert store.agent_messages(document["agent"])[0].content == CONTROL
    finally:
        store.close()


# ----- task lines --------------------------------------------------------------------------------

DONE_RECORD = {
    "id": "done",
    "agent": "dddd5555",
    "status": "ok",
    "text": "reviewed earlier",
    "usage": {},
    "cost_usd": 0.0,
    "error": None,
    "advice": [],
}
HOSTILE_LINES: list[tuple[bytes, str]] = [
    (b'{"id": "bin", "prompt": "\xff\xfe"}', "not valid UTF-8: byte 0xff at column 26"),
    (
        b'{"id": "lone", "prompt": "\\udc80 half a pair"}',
        "'prompt' contains an unpaired surrogate (\\udc80), not valid UTF-8",
    ),
    (
        b'{"id": "huge", "prompt": "' + b"x" * (MAX_TEXT_BYTES + 1) + b'"}',
        f"'prompt' is {MAX_TEXT_BYTES + 1:,} bytes; the limit is {MAX_TEXT_BYTES:,}",
    ),
    (
        b'{"id": "deep", "prompt": "x", "model": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        "not valid JSON: nested too deeply",
    ),
    (
        b'{"id": "nul", "prompt": "a\x00b"}',
        "not valid JSON: Invalid control character at column 27",
    ),
]


def test_hostile_task_lines_each_get_one_error_and_earlier_output_stays(tmp_path: Path) -> None:
    """The one valid task is already done, so nothing starts; each hostile line appends its
    error once, and what the output held before is left byte for byte."""
    work = make_workspace(tmp_path)
    lines = [b'{"id": "done", "prompt": "already reviewed"}', *(raw for raw, _ in HOSTILE_LINES)]
    work.tasks.write_bytes(b"\n".join(lines) + b"\n")
    earlier = (json.dumps(DONE_RECORD) + "\n").encode()
    work.output.write_bytes(earlier)
    for _ in range(2):
        done = work.batch(str(work.tasks), "--model", "gpt-5-mini", "--simulate")
        assert done.returncode == 1, done.stderr
        assert "Traceback" not in done.stderr
    assert work.output.read_bytes().startswith(earlier)
    errors = [(r["line"], r["error"]) for r in work.records()[1:]]
    assert errors == [(line, message) for line, (_, message) in enumerate(HOSTILE_LINES, 2)]
    assert work.output.stat().st_size < 10_000  # no hostile line is echoed back


def test_a_tasks_path_that_is_not_utf8_is_refused_before_ray(tmp_path: Path) -> None:
    work = make_workspace(tmp_path)
    tasks = os.fsencode(str(tmp_path)) + b"/t\xff.jsonl"
    with open(tasks, "w") as handle:
        handle.write('{"id": 1, "prompt": "hi"}\n')
    run = subprocess.run(
        [sys.executable, "-m", "grove.cli.app", "batch", os.fsdecode(tasks), "--simulate"],
        capture_output=True,
        text=True,
        env=work.env,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    assert run.returncode == 2
    assert run.stderr.strip().endswith(
        f"The tasks file path is not valid UTF-8: byte 0xff at character {len(str(tmp_path)) + 3}"
    )
