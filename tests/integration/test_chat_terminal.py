"""`grove chat` in a real pseudo-terminal: Tab completion, Ctrl+C cancelling a streaming turn
while the session goes on, and /exit. The keys are typed as a person would type them.
"""

from __future__ import annotations

import os
import pty
import select
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from supervisor.store import open_store


class Terminal:
    """A child process on a pty; `expect` reads until a text shows up."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: exec the program with the pty as its terminal
            os.execve(argv[0], argv, env)
        self.screen = b""

    def type(self, keys: str) -> None:
        os.write(self.fd, keys.encode())

    def expect(self, text: str, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        start = len(self.screen)
        while text.encode() not in self.screen[start:]:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"{text!r} never appeared; the screen ends with:\n" + (
                self.screen[-2000:].decode(errors="replace")
            )
            ready, _, _ = select.select([self.fd], [], [], min(remaining, 0.2))
            if ready:
                try:
                    self.screen += os.read(self.fd, 65536)
                except OSError:
                    break

    def wait(self, timeout_s: float = 60.0) -> int:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                return os.waitstatus_to_exitcode(status)
            try:
                self.screen += os.read(self.fd, 65536)
            except OSError:
                time.sleep(0.05)
        raise AssertionError("grove chat did not exit")

    def close(self) -> None:
        try:
            os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            pass
        else:
            try:
                os.kill(self.pid, 9)
                os.waitpid(self.pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        os.close(self.fd)


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[tuple[Terminal, str]]:
    store = f"sqlite:///{tmp_path / 'grove.sqlite3'}"
    env = dict(
        os.environ,
        TERM="xterm",
        GROVE_STORE=store,
        GROVE_CONFIG_FILE=str(tmp_path / "none.toml"),
        XDG_DATA_HOME=str(tmp_path / "data"),
        XDG_CONFIG_HOME=str(tmp_path / "config"),
    )
    argv = [
        sys.executable,
        "-m",
        "cli.app",
        "chat",
        "--simulate",
        "--hosts",
        "1",
        "--model",
        "claude-haiku-4-5",
    ]
    running = Terminal(argv, env)
    yield running, store
    running.close()


def test_tab_completion_ctrl_c_and_exit(terminal: tuple[Terminal, str]) -> None:
    term, store = terminal
    term.expect(">")
    term.type("/mo\t")
    term.expect("/model")
    term.type(" claude-sonnet-4-5/m\t")
    term.expect("claude-sonnet-4-5/med")
    term.type("\r")
    term.expect("Thinking: med (budget 43,008 tokens)")
    term.expect(">")
    term.type("[[sim tps=5 tokens=400]] a long answer please\r")
    time.sleep(2.0)  # some of the answer has streamed
    term.type("\x03")
    term.expect("Cancelled", 30)
    term.expect(">")
    term.type('[[sim reply="still here"]] are you there\r')
    term.expect("still here", 30)
    term.expect(">")
    term.type("/exit\r")
    assert term.wait() == 0
    stored = open_store(store)
    (root,) = stored.list_agents()
    kinds = [(m.kind, m.content) for m in stored.agent_messages(root.uuid)]
    assert ("assistant", "still here") in kinds
    assert len([kind for kind, _ in kinds if kind == "assistant"]) == 1  # the cancelled one is not
