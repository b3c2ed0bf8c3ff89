"""Terminal styles in one place: how thinking, warnings and errors look.

Plain text when the stream is not a terminal; nothing else in cli/ hard-codes escape codes.
"""

from __future__ import annotations

from typing import Protocol

DIM = "\x1b[2m"
YELLOW = "\x1b[33m"
RED = "\x1b[31m"
RESET = "\x1b[0m"


class Tty(Protocol):
    """What a stream must tell to be styled: whether a terminal shows it."""

    def isatty(self) -> bool: ...


def styled(stream: Tty, text: str, style: str) -> str:
    """`text` wrapped in `style` when `stream` is a terminal, unchanged otherwise."""
    return f"{style}{text}{RESET}" if stream.isatty() else text
