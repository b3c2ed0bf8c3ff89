"""A child process on a real pseudo-terminal for the tests that type as a person would: what it
wrote, as bytes, and the screen a terminal would show of it (pyte, a VT100 emulator).
"""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import termios
import threading
import time
from pathlib import Path

import pyte

COLUMNS, ROWS = 120, 40


def terminal_env(tmp_path: Path) -> dict[str, str]:
    """What a `grove chat` on a terminal runs with in a test: an xterm, its own store, config
    and data under `tmp_path`, no service (the suite's default, tests/conftest.py)."""
    return dict(
        os.environ,
        PYTHONPATH=str(Path(__file__).resolve().parents[1]),
        TERM="xterm",
        GROVE_STORE=f"sqlite:///{tmp_path / 'grove.sqlite3'}",
        GROVE_CONFIG_FILE=str(tmp_path / "none.toml"),
        XDG_DATA_HOME=str(tmp_path / "data"),
        XDG_CONFIG_HOME=str(tmp_path / "config"),
    )


CURSOR_POSITION_REQUEST = b"\x1b[6n"


class Terminal:
    """`expect` reads until a text shows up after the last text it found (what one read brought
    beyond a match counts for the next `expect`), failing when the program ends first;
    `display` is the screen as it stands."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: exec the program with the pty as its terminal
            os.chdir(cwd)
            os.execve(argv[0], argv, env)
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLUMNS, 0, 0))
        self.screen = b""
        self.seen = 0  # where the last text found ends
        self._emulated = pyte.Screen(COLUMNS, ROWS)
        self._stream = pyte.ByteStream(self._emulated)
        self._answered = 0  # cursor position requests answered

    def type(self, keys: str) -> None:
        os.write(self.fd, keys.encode())

    def paste(self, text: str) -> threading.Thread:
        """`text` as a terminal pastes it (bracketed), written from a thread of its own while
        this one reads: a long paste fills the pty's buffer."""
        data = f"\x1b[200~{text}\x1b[201~".encode()

        def write() -> None:
            view = memoryview(data)
            while view:
                view = view[os.write(self.fd, view[:65536]) :]

        writing = threading.Thread(target=write)
        writing.start()
        return writing

    def _read(self, timeout_s: float) -> bool:
        """Take what the program wrote within `timeout_s`; False once it has closed the pty."""
        ready, _, _ = select.select([self.fd], [], [], timeout_s)
        if ready:
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:
                return False
            self.screen += chunk
            self._stream.feed(chunk)
            self._answer_position_requests()
        return True

    def _answer_position_requests(self) -> None:
        """Say where the cursor is, as a terminal does, to each request for it so far."""
        asked = self.screen.count(CURSOR_POSITION_REQUEST)
        for _ in range(asked - self._answered):
            cursor = self._emulated.cursor
            os.write(self.fd, f"\x1b[{cursor.y + 1};{cursor.x + 1}R".encode())
        self._answered = asked

    def expect(self, text: str, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        wanted = text.encode()
        while (found := self.screen.find(wanted, self.seen)) < 0:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"{text!r} never appeared; the screen ends with:\n" + (
                self.screen[-2000:].decode(errors="replace")
            )
            assert self._read(min(remaining, 0.2)), f"the program ended before {text!r}:\n" + (
                self.screen[-2000:].decode(errors="replace")
            )
        self.seen = found + len(wanted)

    def display(self, settle_s: float = 0.3) -> list[str]:
        """The screen's rows, once the program has written nothing for `settle_s`."""
        while select.select([self.fd], [], [], settle_s)[0] and self._read(0):
            pass
        return [row.rstrip() for row in self._emulated.display]

    def shown(self, text: str, timeout_s: float = 30.0) -> str:
        """The first row of the screen holding `text`, once one does."""
        deadline = time.monotonic() + timeout_s
        while True:
            rows = [row for row in self.display(0.1) if text in row]
            if rows:
                return rows[0]
            assert time.monotonic() < deadline, f"{text!r} is not on the screen:\n" + "\n".join(
                self.display(0)
            )

    def wait(self, timeout_s: float = 60.0) -> int:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                return os.waitstatus_to_exitcode(status)
            if not self._read(0.05):
                time.sleep(0.05)
        raise AssertionError(
            "the program did not exit; the screen ends with:\n"
            + self.screen[-2000:].decode(errors="replace")
        )

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
