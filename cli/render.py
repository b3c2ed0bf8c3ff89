"""Rendering turns: text as it streams, thinking dimmed, notices on stderr, whole lines kept
whole. Only presentation lives here; what a turn is belongs to the layers below.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from grove.cli.printable import printable
from grove.cli.styles import DIM, RED, YELLOW, styled

if TYPE_CHECKING:
    from grove.actors.turn_result import TurnResult
    from grove.supervisor.contract import TurnAPI


TOOL_MARKS = {"tool_call": "→", "tool_result": "←"}


class Sink(Protocol):
    """Where a TurnWriter writes: a text stream, or the live chat's screen (cli/chat_screen.py)."""

    def write(self, text: str, /) -> int: ...

    def flush(self) -> None: ...

    def isatty(self) -> bool: ...


class TurnWriter:
    """Writes turn chunks and whole lines to `out`, thread-safe, lines never glued to a delta;
    whatever it is given is made printable first (it may come from a model)."""

    def __init__(self, out: Sink, *, styles: bool) -> None:
        self.out = out
        self.styles = styles
        self._lock = threading.Lock()
        self._at_line_start = True
        self._last_kind: str | None = None

    def _write(self, text: str) -> None:
        if text:
            self.out.write(text)
            self.out.flush()
            self._at_line_start = text.endswith("\n")

    def _style(self, text: str, style: str) -> str:
        return styled(self.out, text, style) if self.styles else text

    def line(self, text: str, *, error: bool = False) -> None:
        text = printable(text)
        with self._lock:
            if not self._at_line_start:
                self._write("\n")
            self._write((self._style(text, RED) if error else text) + "\n")
            self._last_kind = None

    def chunk(self, kind: str, text: str) -> None:
        text = printable(text)
        with self._lock:
            if kind == "notice":
                sys.stderr.write(styled(sys.stderr, text, YELLOW) + "\n")
                sys.stderr.flush()
                return
            if kind in TOOL_MARKS:  # one line per call and per result
                if not self._at_line_start:
                    self._write("\n")
                self._write(self._style(f"{TOOL_MARKS[kind]} {text}", DIM) + "\n")
                self._last_kind = kind
                return
            if self._last_kind == "thinking" and kind == "text":
                self._write("\n\n")
            self._last_kind = kind
            self._write(self._style(text, DIM) if kind == "thinking" else text)

    def end_turn(self) -> None:
        with self._lock:
            if not self._at_line_start:
                self._write("\n")
            self._last_kind = None

    def stream(self, turn: TurnAPI, seen: Callable[[str, str], None] | None = None) -> TurnResult:
        """Print a whole turn: its deltas (each told to `seen` too), then its error or
        cancellation if any; its result."""
        for kind, text in turn:
            self.chunk(kind, text)
            if seen is not None:
                seen(kind, text)
        result = turn.result()
        self.end_turn()
        if result.cancelled:
            self.line("Cancelled")
        elif result.error is not None:
            self.line(result.error, error=True)
        return result
