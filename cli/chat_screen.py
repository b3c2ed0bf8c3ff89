"""The live chat's screen: whole lines of a reply scroll above the prompt while the line still
being written shows just above it; redraws are asked for from any thread and kept calm.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import groupby
from operator import itemgetter
from typing import TextIO

from prompt_toolkit.application import get_app_or_none, run_in_terminal
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.utils import get_cwidth

from grove.cli.styles import DIM, RED, RESET, YELLOW

# About three redraws a second at most, however fast a reply streams; nothing is drawn while idle.
MIN_REDRAW_INTERVAL_S = 0.3
# Rows of an unfinished line shown above the prompt; rows before them scroll up whole.
LIVE_ROWS = 4
_SGR = re.compile(r"(\x1b\[[0-9;]*m)")
# cli/styles.py's styles as prompt_toolkit draws them.
DRAWN_STYLES = {DIM: "dim", RED: "fg:ansired", YELLOW: "fg:ansiyellow"}

Segment = tuple[str, str]  # (the SGR style it is written in, its text)


def joined(segments: list[Segment]) -> str:
    return "".join(f"{style}{text}{RESET}" if style else text for style, text in segments)


def regrouped(chars: list[Segment]) -> list[Segment]:
    """Characters, each with its style, as runs of one style."""
    return [(style, "".join(c for _, c in run)) for style, run in groupby(chars, key=itemgetter(0))]


def rows_of(segments: list[Segment], width: int) -> list[list[Segment]]:
    """A line cut into rows of `width` cells, as a terminal would wrap it (the last may be
    shorter); a character wider than a row makes one alone."""
    chars = [(style, char) for style, text in segments for char in text]
    rows: list[list[Segment]] = []
    start = 0
    while start < len(chars):
        used, end = 0, start
        while end < len(chars) and used + get_cwidth(chars[end][1]) <= width:
            used += get_cwidth(chars[end][1])
            end += 1
        end = max(end, start + 1)
        rows.append(regrouped(chars[start:end]))
        start = end
    return rows


def split_rows(segments: list[Segment], width: int, keep: int) -> tuple[list[str], list[Segment]]:
    """An unfinished line's rows but its last `keep`, to scroll up whole, and what is left."""
    if sum(get_cwidth(char) for _, text in segments for char in text) <= width * keep:
        return [], segments
    rows = rows_of(segments, width)
    return [joined(row) for row in rows[:-keep]], [part for row in rows[-keep:] for part in row]


class LiveOutput:
    """A text stream for cli/render.py's TurnWriter: each whole line waits to be written above
    the prompt (at the next redraw), the unfinished one is shown as part of the prompt. Without
    a prompt on screen (between two, or once the chat stops asking) lines go out at once."""

    def __init__(self, terminal: TextIO) -> None:
        self._terminal = terminal
        self._lock = threading.RLock()
        self._lines: list[str] = []
        self._partial: list[Segment] = []
        self._version = 0  # of the unfinished line
        self._shown: tuple[int, int, StyleAndTextTuples] = (0, 0, [])  # (version, width, rows)
        self._style = ""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._scheduled = False
        self._last_draw = 0.0
        self._held = False
        self._plain = False  # no prompt will show the unfinished line: written as it comes

    def isatty(self) -> bool:
        return True

    def write(self, text: str) -> int:
        with self._lock:
            if self._plain:
                self._terminal.write(text)
                return len(text)
            for token in _SGR.split(text):
                if _SGR.fullmatch(token):
                    self._style = "" if token == RESET else token
                    continue
                *whole, rest = token.split("\n")
                for piece in whole:
                    self._take(piece)
                    self._lines.append(joined(self._partial))
                    self._partial = []
                self._take(rest)
            self._version += 1
            width = max(shutil.get_terminal_size().columns, 10)
            rows, self._partial = split_rows(self._partial, width, LIVE_ROWS)
            self._lines.extend(rows)
        return len(text)

    def _take(self, text: str) -> None:
        if not text:
            return
        if self._partial and self._partial[-1][0] == self._style:
            self._partial[-1] = (self._style, self._partial[-1][1] + text)
        else:
            self._partial.append((self._style, text))

    def flush(self) -> None:
        self.redraw()

    def unfinished(self, width: int) -> StyleAndTextTuples:
        """The line being written in rows of `width` cells, each with its line end, as
        prompt_toolkit draws it; empty when there is none."""
        with self._lock:
            if self._shown[:2] != (self._version, width):  # drawn several times a redraw
                shown: StyleAndTextTuples = []
                for row in rows_of(self._partial, max(width, 1)):
                    shown.extend((DRAWN_STYLES.get(style, ""), text) for style, text in row)
                    shown.append(("", "\n"))
                self._shown = (self._version, width, shown)
            return self._shown[2]

    def redraw(self) -> None:
        """Write whole lines above the prompt and draw it again, soon: at once when nothing
        was drawn for a while, else when MIN_REDRAW_INTERVAL_S has passed. Any thread."""
        with self._lock:
            loop = self._loop
            if loop is None:
                self._write_lines()
                if self._plain:
                    self._terminal.flush()
                return
            if self._scheduled:
                return
            self._scheduled = True
            delay = max(0.0, self._last_draw + MIN_REDRAW_INTERVAL_S - time.monotonic())
        try:
            loop.call_soon_threadsafe(self._schedule, delay)
        except RuntimeError:  # that prompt's loop has closed: the next prompt writes them
            with self._lock:
                self._scheduled = False

    def _schedule(self, delay: float) -> None:
        asyncio.get_running_loop().call_later(delay, self._draw)

    def _draw(self) -> None:
        with self._lock:
            self._scheduled = False
            self._last_draw = time.monotonic()
            lines = bool(self._lines)
        app = get_app_or_none()
        if lines:
            run_in_terminal(self._write_lines)  # the prompt is drawn again after them
        elif app is not None:
            app.invalidate()

    def _write_lines(self) -> None:
        with self._lock:
            if self._held or not self._lines:
                return
            lines, self._lines = self._lines, []
            self._terminal.write("".join(f"{line}\n" for line in lines))
            self._terminal.flush()

    def attach(self) -> None:
        """A prompt is running on this thread's loop: lines go above it from now on."""
        with self._lock:
            self._loop = asyncio.get_running_loop()
            self._scheduled = False
        self.redraw()

    def detach(self) -> None:
        """The prompt has ended: what waits is written now, and what comes goes out at once."""
        with self._lock:
            self._loop = None
            self._write_lines()

    def plain(self) -> None:
        """No prompt will show the unfinished line again: it and all after go out as written."""
        with self._lock:
            self._loop = None
            self._write_lines()
            self._terminal.write(joined(self._partial))
            self._terminal.flush()
            self._partial = []
            self._version += 1
            self._plain = True

    @contextmanager
    def held(self) -> Iterator[None]:
        """Nothing written while another program has the terminal (an editor)."""
        with self._lock:
            self._held = True
        try:
            yield
        finally:
            with self._lock:
                self._held = False
            self.redraw()
