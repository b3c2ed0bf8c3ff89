"""What both chat REPLs share (cli/chat.py's piped one, cli/chat_live.py's terminal one): a
line is a command when it starts with `/`, else a prompt; `/todo edit` opens $EDITOR.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING

from grove.providers.errors import GroveError

if TYPE_CHECKING:
    from grove.supervisor.contract import GroveAPI


def edit_todo(grove: GroveAPI, session: str) -> tuple[str, bool]:
    """`/todo edit`: the focused agent's list as markdown in $EDITOR, read back when the
    editor exits; (what happened, whether it worked)."""
    shown = grove.dispatch(session, "/todo", "repl")
    markdown = "" if not shown.data.get("phases") else shown.text
    with tempfile.TemporaryDirectory(prefix="grove-todo-") as directory:
        draft = Path(directory) / "todo.md"
        draft.write_text(markdown + "\n" if markdown else "# Todos\n", encoding="utf-8")
        editor = shlex.split(os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi")
        try:
            status = subprocess.call([*editor, str(draft)])
        except OSError as exc:
            return f"Cannot start the editor {editor[0]}: {exc.strerror or exc}", False
        if status != 0:
            return f"The editor exited with status {status}; the todo list was not changed", False
        # Read the path again: many editors replace the file rather than write into it.
        edited = draft.read_text(encoding="utf-8", errors="replace")
    try:
        return grove.set_todo(session, edited), True
    except GroveError as exc:
        return str(exc), False


class Repl(ABC):
    """What both REPLs share: a line is a command when it starts with `/`, else a prompt."""

    grove: GroveAPI
    session: str

    def handle(self, line: str) -> bool:
        """Act on one stripped line; True when the REPL should end."""
        if line.split() == ["/todo", "edit"]:
            self.report(*self.edit())
            return False
        if line.startswith("/"):
            return self.command(line)
        self.prompt(line)
        return False

    def edit(self) -> tuple[str, bool]:
        """`/todo edit`, in $EDITOR."""
        return edit_todo(self.grove, self.session)

    @abstractmethod
    def report(self, text: str, ok: bool) -> None:
        """Show the outcome of something the REPL did itself."""

    @abstractmethod
    def command(self, line: str) -> bool:
        """Run one command and show its outcome; True when it ends the REPL."""

    @abstractmethod
    def prompt(self, text: str) -> None:
        """Send `text` to the focused agent."""
