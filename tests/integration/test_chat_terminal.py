"""`grove chat` in a real pseudo-terminal: Tab completion, Ctrl+C cancelling a streaming turn
while the session goes on, the y / n / a approval prompt, and /exit, in one session. The keys
are typed as a person would type them.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from grove.supervisor.store import open_store
from tests.terminal import Terminal, terminal_env


@pytest.fixture
def chat(tmp_path: Path) -> Iterator[Callable[..., tuple[Terminal, str]]]:
    """Starts `grove chat` on a pty with extra options, in a workspace of its own; returns the
    terminal and the store's URL."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    env = terminal_env(tmp_path)
    store = env["GROVE_STORE"]
    argv = [
        sys.executable,
        "-m",
        "grove.cli.app",
        "chat",
        "--simulate",
        "--hosts",
        "1",
        "--model",
        "claude-haiku-4-5",
    ]
    started: list[Terminal] = []

    def start(*options: str) -> tuple[Terminal, str]:
        started.append(Terminal([*argv, *options], env, workspace))
        return started[-1], store

    yield start
    for running in started:
        running.close()


BASH_CALL = '[[sim tool=bash args=\'{"command": "echo %s > %s.txt"}\' step=1]]'


def test_tab_completion_ctrl_c_approvals_and_exit(
    chat: Callable[..., tuple[Terminal, str]], tmp_path: Path
) -> None:
    """One session (one Ray started) for all of it: Tab, Ctrl+C, then a tool that asks first
    answered y, n or a."""
    term, store = chat("--tools", "bash")
    workspace = tmp_path / "workspace"
    term.expect(">")
    # What Tab completes may be drawn apart from what was typed (keys that come in two reads).
    term.type("/mo\t")
    term.expect("/mo")
    term.expect("del")
    term.type(" claude-sonnet-5-5/m\t")
    term.expect("claude-sonnet-5-5/m")
    term.expect("ed")
    term.type("\r")
    term.expect("Thinking: medium effort")
    term.expect(">")
    term.type("[[sim tps=5 tokens=400]] a long answer please\r")
    time.sleep(2.0)  # some of the answer has streamed
    term.type("\x03")
    term.expect("Cancelled", 30)
    term.expect(">")
    term.type('[[sim reply="still here"]] are you there\r')
    term.expect("still here", 30)
    term.expect(">")
    for word, name, answer, outcome in (
        ("one", "yes", "y", "\u2190 bash: exit code 0"),
        ("two", "no", "n", "\u2190 bash failed: The user did not allow bash this time."),
        ("three", "always", "a", "\u2190 bash: exit code 0"),
    ):
        term.type(BASH_CALL % (word, name) + f" write {name}.txt\r")
        term.expect("Allow bash? [y/n/a]")
        term.type(answer)  # the next key typed answers
        term.expect(outcome)
        term.expect(">")
    # "a" allowed bash for the rest of the session: the next call is not asked about.
    term.type(BASH_CALL % ("four", "again") + " write again.txt\r")
    term.expect("\u2190 bash: exit code 0")
    term.expect(">")
    term.type("/exit\r")
    assert term.wait() == 0
    assert b"Allow bash?" not in term.screen.rsplit("\u2192 bash".encode(), 1)[-1]
    assert [(workspace / f"{name}.txt").exists() for name in ("yes", "no", "always", "again")] == [
        True, False, True, True
    ]  # fmt: skip
    assert (workspace / "again.txt").read_text() == "four\n"
    stored = open_store(store)
    try:
        (root,) = stored.list_agents()
        kinds = [(m.kind, m.content) for m in stored.agent_messages(root.uuid)]
        events = [event.kind for event in stored.events(limit=1000)]
    finally:
        stored.close()
    replies = [content for kind, content in kinds if kind == "assistant"]
    # "still here" first, then a call and a reply for each bash turn; the cancelled one is not.
    assert (replies[0], len(replies)) == ("still here", 1 + 2 * 4)
    assert events.count("ApprovalRequested") == 3  # y, n, a; not the call after "a"
    assert (events.count("ToolApproved"), events.count("ToolRefused")) == (3, 1)
