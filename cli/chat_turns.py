"""The live chat's turns: one at a time on a thread of their own, prompts typed meanwhile queued
in order; a cancel holds the queue until the person sends it on or drops it.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import TYPE_CHECKING

from grove.providers.errors import GroveError
from grove.providers.plurals import counted

if TYPE_CHECKING:
    from grove.cli.chat_status import StatusLine
    from grove.cli.render import TurnWriter
    from grove.supervisor.contract import GroveAPI, TurnAPI

SHOWN_CHARS = 60  # of a queued prompt, when it is sent


def shortened(text: str) -> str:
    """A prompt's first line, cut to SHOWN_CHARS."""
    lines = text.strip().splitlines() or [""]
    if len(lines) > 1 or len(lines[0]) > SHOWN_CHARS:
        return lines[0][:SHOWN_CHARS] + "…"
    return lines[0]


class TurnRunner:
    """Sends prompts to the session's focused agent and streams each turn to its end before the
    next; turns a command started (`/fork PROMPT`) are followed before queued prompts."""

    def __init__(
        self, grove: GroveAPI, session: str, writer: TurnWriter, status: StatusLine
    ) -> None:
        self._grove = grove
        self._session = session
        self._writer = writer
        self._status = status
        self._work = threading.Condition()
        self._prompts: deque[tuple[str, bool]] = deque()  # (prompt, whether it waited)
        self._begun: deque[TurnAPI] = deque()
        self._current: TurnAPI | None = None
        self._working = False  # a prompt is being sent or a turn followed
        self._cancelling = False
        self._stopping = False
        self.held = False  # a cancel holds the queue: Enter sends it on, Ctrl+C drops it
        self._thread = threading.Thread(target=self._serve, name="grove-chat-turns", daemon=True)
        self._thread.start()

    @property
    def streaming(self) -> bool:
        with self._work:
            return self._current is not None

    @property
    def queued(self) -> int:
        with self._work:
            return len(self._prompts)

    def submit(self, text: str) -> int:
        """Queue a prompt (sending on a held queue); its place in the queue, 0 when it is
        sent at once."""
        with self._work:
            ahead = self._working or bool(self._begun or self._prompts)
            self._prompts.append((text, ahead))
            self.held = False
            self._work.notify()
            place = len(self._prompts) if ahead else 0
        self._status.queued(self.queued)
        return place

    def follow(self, turn: TurnAPI) -> None:
        with self._work:
            self._begun.append(turn)
            self._work.notify()

    def cancel(self) -> str | None:
        """Hold the queue and name the agent whose turn is to be cancelled (None: no turn
        streams, or its cancel is already asked for)."""
        with self._work:
            self.held = True
            if self._current is None or self._cancelling:
                return None
            self._cancelling = True
            return self._current.agent

    def release(self) -> int:
        """Send a held queue on; how many prompts it holds."""
        with self._work:
            self.held = False
            self._work.notify()
            return len(self._prompts)

    def clear(self) -> int:
        """Drop the queued prompts; how many there were."""
        with self._work:
            dropped = len(self._prompts)
            self._prompts.clear()
        self._status.queued(0)
        return dropped

    def finish(self) -> None:
        """Stop once the turn streaming now (if any) has ended; queued prompts are not sent."""
        with self._work:
            self._stopping = True
            self._work.notify()
        self._thread.join()

    def _serve(self) -> None:
        while True:
            with self._work:
                while not (self._stopping or self._begun or (self._prompts and not self.held)):
                    self._work.wait()
                if self._stopping:
                    return
                prompt = None if self._begun else self._prompts.popleft()
                turn = self._begun.popleft() if prompt is None else None
                self._working = True
            self._status.queued(self.queued)
            if prompt is not None:
                turn = self._send(*prompt)
            if turn is not None:
                self._follow(turn)
            with self._work:
                self._working = False

    def _send(self, text: str, waited: bool) -> TurnAPI | None:
        if waited:
            self._writer.line(f"Sending: {shortened(text)}")
        try:
            return self._grove.send(self._grove.focus(self._session), text)
        except GroveError as exc:
            self._writer.line(str(exc), error=True)
            return None

    def _follow(self, turn: TurnAPI) -> None:
        with self._work:
            self._current = turn
            self._cancelling = False
        self._status.turn_began()
        result = None
        try:
            result = self._writer.stream(turn, self._status.seen)
        except Exception as exc:  # a lost host or Ray error: report it, keep the chat
            self._writer.line(f"Turn failed: {exc}", error=True)
        finally:
            with self._work:
                self._current = None
                waiting = len(self._prompts) if self.held else 0
        self._status.turn_ended(result)
        self._status.refresh()
        if waiting:
            self._writer.line(
                f"{counted(waiting, 'queued prompt')} held: Enter sends them, Ctrl+C drops them"
            )
