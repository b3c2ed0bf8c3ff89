"""Rendering a streaming reply: text as it comes, thinking dimmed, notices on stderr.

Only presentation lives here; what a turn is and how it streams belongs to the layers below.
"""

from __future__ import annotations

import sys
from typing import TextIO

from cli.styles import DIM, YELLOW, styled
from providers.base import (
    ProviderWarning,
    Retrying,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
)


class StreamPrinter:
    """Writes deltas to `out` (unless quiet) and notices to `err`."""

    def __init__(
        self, out: TextIO | None = None, err: TextIO | None = None, *, quiet: bool = False
    ) -> None:
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.quiet = quiet
        self._in_thinking = False
        self._wrote = False

    def event(self, event: StreamEvent) -> None:
        match event:
            case ThinkingDelta(text=text) if not self.quiet:
                self._in_thinking = True
                self._write(styled(self.out, text, DIM))
            case TextDelta(text=text) if not self.quiet:
                if self._in_thinking:
                    self._in_thinking = False
                    self._write("\n\n")
                self._write(text)
            case Retrying(attempt=attempt, delay_s=delay, reason=reason):
                self.notice(f"attempt {attempt} failed ({reason}); retrying in {delay:.1f}s")
            case ProviderWarning(text=text):
                self.notice(text)
            case _:
                pass

    def notice(self, text: str) -> None:
        self.err.write(styled(self.err, text, YELLOW) + "\n")
        self.err.flush()

    def finish(self) -> None:
        if self._wrote:
            self._write("\n")

    def _write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()
        self._wrote = True
