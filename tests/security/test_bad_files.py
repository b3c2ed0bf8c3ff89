"""Bad files and settings get one precise line, never a traceback: a config that is not UTF-8, an
unusable store (refused before Ray starts), a base URL that is not http(s), a store or a
credentials file others can read (a warning, only where it matters), a piped chat's refusals.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.security.commands import Place, make_place

PASSWORD = "hunter2pass"


def tasks_file(place: Place) -> Path:
    tasks = place.base / "tasks.jsonl"
    tasks.write_text('{"id": "a", "prompt": "hello"}\n')
    return tasks


def test_a_config_that_is_not_utf8_is_one_line_on_every_command(place: Place) -> None:
    Path(place.env["GROVE_CONFIG_FILE"]).write_bytes(b'[defaults]\nmodel = "\xff\xfe"\n')
    expected = f"{place.env['GROVE_CONFIG_FILE']} is not UTF-8 text: byte 0xff at offset 20"
    for args in (
        ("agents",),
        ("history", "abc"),
        ("events",),
        ("run", "--simulate", "--model", "gpt-5-mini", "hi"),
        ("chat", "--simulate"),
        ("batch", str(tasks_file(place)), "--simulate", "--model", "gpt-5-mini"),
    ):
        done = place.grove(*args)
        assert (done.returncode, done.stderr.strip()) == (2, expected), args
    assert not place.ray_started()


def test_an_unusable_store_fails_run_chat_and_batch_before_ray_starts(place: Place) -> None:
    store = place.base / "not-a-store.sqlite3"
    store.write_bytes(b"this is no SQLite database, just text" * 100)
    before = store.read_bytes()
    expected = f"SQLite store {store}: open failed: file is not a database"
    for args in (
        ("run", "--simulate", "--model", "gpt-5-mini", "hi"),
        ("chat", "--simulate"),
        ("batch", str(tasks_file(place)), "--simulate", "--model", "gpt-5-mini"),
    ):
        done = place.grove(*args, GROVE_STORE=f"sqlite:///{store}")
        assert done.returncode == 2, (args, done.stderr)
        assert expected in done.stderr, args
    assert not place.ray_started()  # refused before Ray was started
    assert store.read_bytes() == before


@pytest.mark.parametrize("url", ["ftp://user:hunter2pass@example.test/", "file:///etc", "http:///"])
def test_a_base_url_that_cannot_work_is_refused_at_load(place: Place, url: str) -> None:
    Path(place.env["GROVE_CONFIG_FILE"]).write_text(f'[providers.openai]\nbase_url = "{url}"\n')
    done = place.grove("run", "--simulate", "--model", "gpt-5-mini", "hi")
    assert done.returncode == 2
    assert "providers.openai.base_url: Value error, base URL" in done.stderr
    assert PASSWORD not in done.stdout + done.stderr
    assert not place.ray_started()


def test_a_base_url_variable_that_cannot_work_is_refused_at_load(place: Place) -> None:
    done = place.grove(
        "run", "--model", "gpt-5-mini", "hi", ANTHROPIC_BASE_URL=f"gopher://me:{PASSWORD}@x/"
    )
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "ANTHROPIC_BASE_URL: base URL 'gopher://x/' must start with http:// or https://"
    )
    assert not place.ray_started()


# Rejected lines (each says why), then a turn: the chat exits 1, after running them all.
REJECTED_THEN_A_TURN = '/fork "unclosed\n/nonsense\n[[sim reply=still-here]] hello\n'


@dataclass(frozen=True)
class Exposed:
    """A store, then a credentials file, made readable by others, and what commands said:
    one piped `grove chat` (which starts Ray) with both exposed serves the three tests below."""

    store: Path
    credentials: Path
    made: subprocess.CompletedProcess[str]  # `agents` making the store
    again: subprocess.CompletedProcess[str]  # `agents` on it, still 0600
    store_mode: int  # of the store `agents` made
    exposed_store: subprocess.CompletedProcess[str]  # `agents` with the store 0644
    reads: dict[str, subprocess.CompletedProcess[str]]  # with the credentials 0644 too
    chat: subprocess.CompletedProcess[str]  # with both 0644


@pytest.fixture(scope="module")
def exposed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Exposed]:
    for place in make_place(tmp_path_factory.mktemp("exposed")):
        store = Path(place.env["GROVE_STORE"].removeprefix("sqlite:///"))
        made = place.grove("agents")  # creates the store
        store_mode = store.stat().st_mode & 0o777
        again = place.grove("agents")
        store.chmod(0o644)
        exposed_store = place.grove("agents")
        credentials = Path(place.env["XDG_CONFIG_HOME"]) / "grove" / "credentials.json"
        credentials.parent.mkdir(parents=True)
        credentials.write_text('{"openai": {"api_key": "sk-not-used-here"}}')
        credentials.chmod(0o644)
        reads = {args[0]: place.grove(*args) for args in (("agents",), ("events",),
                                                          ("history", "zzzz"))}  # fmt: skip
        chat = place.grove(
            "chat", "--simulate", "--model", "gpt-5-mini", stdin=REJECTED_THEN_A_TURN
        )
        yield Exposed(store, credentials, made, again, store_mode, exposed_store, reads, chat)


def test_a_store_others_can_read_is_used_with_a_warning(exposed: Exposed) -> None:
    assert exposed.made.returncode == 0
    assert exposed.store_mode == 0o600
    assert "Warning" not in exposed.again.stderr
    warning = (
        f"Warning: the store {exposed.store} can be read by other users (mode 644); run: chmod 600"
    )
    done = exposed.exposed_store
    assert (done.returncode, done.stdout) == (0, "No agents\n")
    assert warning in done.stderr
    assert warning in exposed.chat.stderr and "still-here" in exposed.chat.stdout


def test_only_commands_that_load_keys_warn_about_the_credentials_file(exposed: Exposed) -> None:
    warning = f"Warning: {exposed.credentials} could be read by other users (mode 644)"
    for name, done in exposed.reads.items():
        assert warning not in done.stderr, name
    assert warning in exposed.chat.stderr
    assert exposed.credentials.stat().st_mode & 0o777 == 0o600


def test_a_piped_chat_that_rejected_lines_exits_1_after_running_them_all(
    exposed: Exposed,
) -> None:
    done = exposed.chat
    assert done.returncode == 1, done.stderr  # for the rejected lines alone
    assert "Unclosed quote in prompt" in done.stdout
    assert "Unknown command: /nonsense" in done.stdout
    assert "still-here" in done.stdout
    assert done.stderr.strip().endswith("2 of the lines read were rejected")
