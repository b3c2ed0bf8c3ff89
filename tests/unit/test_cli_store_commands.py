"""`grove agents`, `grove history` and `grove events` in-process (CliRunner) over real SQLite.

The store is filled through its own API; the commands read it without Ray.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from grove.cli.app import app, hoisted
from grove.cli.doctor import store as doctor_store
from grove.supervisor.config import load_settings
from grove.supervisor.store import AgentRecord, SqliteStore

ROOT = "aaaa1111-0000-4000-8000-000000000000"
CHILD = "bbbb2222-0000-4000-8000-000000000000"
DEAD = "bbbb3333-0000-4000-8000-000000000000"
GRANDCHILD = "cccc4444-0000-4000-8000-000000000000"


@pytest.fixture
def filled(sqlite_path: Path, sqlite_store: SqliteStore) -> str:
    now = time.time()
    sqlite_store.create_agents(
        [
            AgentRecord(
                uuid=ROOT,
                role="root",
                provider="anthropic",
                model="claude-sonnet-4-5",
                thinking_level="med",
                created_at=now,
            )
        ]
    )
    first = sqlite_store.append_message(ROOT, "user", "root question")
    sqlite_store.append_message(
        ROOT,
        "assistant",
        "root answer",
        {"parts": [{"kind": "thinking", "text": "pondering"}, {"kind": "text", "text": "x"}]},
    )
    sqlite_store.create_agents(
        [
            AgentRecord(
                uuid=CHILD,
                parent_uuid=ROOT,
                role="child",
                fork_message_id=first.id,
                provider="openai",
                model="gpt-5",
                thinking_level="high",
                created_at=now + 1,
            ),
            AgentRecord(uuid=DEAD, parent_uuid=ROOT, role="child", created_at=now + 2),
        ]
    )
    sqlite_store.update_agent(DEAD, status="dead", ended_at=now + 3)
    sqlite_store.append_message(CHILD, "user", "child task")
    sqlite_store.create_agents(
        [
            AgentRecord(
                uuid=GRANDCHILD,
                parent_uuid=CHILD,
                role="child",
                fork_message_id=sqlite_store.last_message_id(),
                provider="openai",
                model="gpt-5",
                created_at=now + 4,
            )
        ]
    )
    sqlite_store.append_message(GRANDCHILD, "user", "grandchild task")
    sqlite_store.append_event("AgentForked", {"agent": CHILD})
    sqlite_store.append_event("AgentKilled", {"agent": DEAD})
    sqlite_store.append_event("AgentForked", {"agent": GRANDCHILD})
    return f"sqlite:///{sqlite_path}"


def invoke(store_url: str, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["--store", store_url, *args])
    return result.exit_code, result.stdout, result.stderr


def test_agents_shows_the_agents_not_ended_indented_by_depth(filled: str) -> None:
    code, out, _ = invoke(filled, "agents")
    assert code == 0
    assert out.splitlines() == [
        f"{ROOT}  root  stopped  anthropic/claude-sonnet-4-5/med  2 messages",
        f"  {CHILD}  child  stopped  openai/gpt-5/high  1 message",
        f"    {GRANDCHILD}  child  stopped  openai/gpt-5/default  1 message",
    ]


def test_agents_all_includes_dead_ones(filled: str) -> None:
    code, out, _ = invoke(filled, "agents", "--all")
    assert code == 0
    assert f"  {DEAD}  child  dead  no model  0 messages" in out.splitlines()
    assert len(out.splitlines()) == 4


def test_agents_shows_the_readable_records_and_names_the_unreadable_one(
    filled: str, sqlite_path: Path
) -> None:
    with sqlite3.connect(sqlite_path) as raw:  # damage one record behind the store's back
        raw.execute("UPDATE agents SET role = 'emperor' WHERE uuid = ?", (CHILD,))
    code, out, err = invoke(filled, "agents")
    assert code == 1
    assert out.splitlines() == [
        f"{ROOT}  root  stopped  anthropic/claude-sonnet-4-5/med  2 messages",
        f"{GRANDCHILD}  child  stopped  openai/gpt-5/default  1 message",
    ]
    assert err.startswith(f"Skipped an unreadable agent record: Corrupted agent record '{CHILD}'")


def test_agents_on_an_empty_store(tmp_path: Path) -> None:
    code, out, _ = invoke(f"sqlite:///{tmp_path / 'empty.sqlite3'}", "agents")
    assert (code, out) == (0, "No agents\n")


def test_history_assembles_inherited_messages_by_prefix(filled: str) -> None:
    code, out, _ = invoke(filled, "history", "cccc")
    assert code == 0
    headers = [line for line in out.splitlines() if line.startswith("[")]
    assert headers == [
        f"[1] user  from {ROOT}",
        f"[3] user  from {CHILD}",
        "[4] user",
    ]
    assert out.index("root question") < out.index("child task") < out.index("grandchild task")
    assert "root answer" not in out  # after the child's fork point


def test_history_shows_thinking_and_kind_labels(filled: str) -> None:
    code, out, _ = invoke(filled, "history", ROOT)
    assert code == 0
    assert "[2] assistant\n(thinking) pondering\nroot answer\n" in out


def test_history_rejects_an_ambiguous_prefix(filled: str) -> None:
    code, out, err = invoke(filled, "history", "bbbb")
    assert code == 1
    assert out == ""
    assert "bbbb" in err


def test_events_prints_json_lines_after_an_id(filled: str) -> None:
    code, out, _ = invoke(filled, "events")
    assert code == 0
    events = [json.loads(line) for line in out.splitlines()]
    assert [(e["id"], e["kind"], e["payload"]) for e in events] == [
        (1, "AgentForked", {"agent": CHILD}),
        (2, "AgentKilled", {"agent": DEAD}),
        (3, "AgentForked", {"agent": GRANDCHILD}),
    ]
    code, out, _ = invoke(filled, "events", "--after", "2")
    assert [json.loads(line)["id"] for line in out.splitlines()] == [3]


def test_a_bad_store_url_fails_with_its_reason(tmp_path: Path) -> None:
    code, out, err = invoke("mysql://nowhere", "agents")
    assert code == 1
    assert out == ""
    assert "Unknown store URL" in err


def test_the_store_option_may_follow_the_command(filled: str) -> None:
    before = invoke(filled, "agents")
    for args in (["agents", "--store", filled], ["agents", f"--store={filled}"]):
        result = CliRunner().invoke(app, args)
        assert (result.exit_code, result.stdout, result.stderr) == before, args


def test_global_options_after_the_command_move_before_it_but_not_past_a_double_dash() -> None:
    assert hoisted(["agents", "--store", "s", "--all"]) == ["--store", "s", "agents", "--all"]
    assert hoisted(["run", "--address=a", "hi"]) == ["--address=a", "run", "hi"]
    assert hoisted(["--store", "s", "agents"]) == ["--store", "s", "agents"]
    assert hoisted(["run", "--", "--store", "x"]) == ["run", "--", "--store", "x"]
    given = ["--store", "s", "agents", "--address", "a"]
    assert hoisted(given) == ["--address", "a", "--store", "s", "agents"]


def test_a_store_in_a_directory_that_does_not_exist_is_an_error_and_is_not_made(
    tmp_path: Path,
) -> None:
    missing = tmp_path / "no" / "such" / "dir"
    for command in (["agents"], ["history", "x"], ["events"], ["usage"]):
        code, out, err = invoke(f"sqlite:///{missing / 'x.db'}", *command)
        assert (code, out) == (2, ""), command
        url = f"sqlite:///{missing / 'x.db'}"
        assert err.strip() == f"No Grove store at {url}: the directory {missing} does not exist"
    assert not (tmp_path / "no").exists()


def test_doctor_names_the_default_store_it_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    monkeypatch.setenv("GROVE_CONFIG_FILE", str(tmp_path / "none.toml"))
    monkeypatch.delenv("GROVE_STORE", raising=False)
    settings = load_settings()
    assert settings.store is None  # nothing set: the default file
    (finding,) = doctor_store(settings)
    assert finding.detail == f"sqlite:///{tmp_path / 'grove' / 'grove.sqlite3'}: 0 agents"
