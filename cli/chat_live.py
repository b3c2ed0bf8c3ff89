"""`grove chat` at a terminal: the prompt stays live while a reply streams above it. Commands run
at once, prompts queue, Ctrl+C or Esc cancels the turn, a status line sits under the prompt.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TYPE_CHECKING

from prompt_toolkit import PromptSession
from prompt_toolkit.application import get_app
from prompt_toolkit.filters import Condition
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.keys import Keys
from prompt_toolkit.patch_stdout import patch_stdout

from grove.cli.chat_screen import LiveOutput
from grove.cli.chat_status import StatusLine
from grove.cli.chat_turns import TurnRunner
from grove.cli.printable import printable
from grove.cli.render import TurnWriter
from grove.cli.repl import Repl, edit_todo
from grove.providers.errors import GroveError
from grove.providers.plurals import counted
from grove.supervisor.batch.tasks import MAX_TEXT_BYTES

if TYPE_CHECKING:
    from grove.supervisor.approvals import ApprovalRequest
    from grove.supervisor.contract import GroveAPI

PROMPT = "> "
ORIGIN = "repl-interactive"
ANSWER_KEYS = {"y": "y", "a": "a"}  # any other key typed to an approval question: no
LEAVING_CHECK_S = 0.5  # how often a waiting approval question looks whether the chat ends
TYPED_KEYS = tuple(chr(code) for code in range(0x20, 0x7F))


def too_long(text: str) -> str | None:
    """Why a line cannot be sent (longer than a prompt may be), or None."""
    size = len(text.encode("utf-8", "replace"))
    if size <= MAX_TEXT_BYTES:
        return None
    return f"A line of {size:,} bytes is over the prompt limit of {MAX_TEXT_BYTES:,}; not sent"


@contextmanager
def deferred_interrupts(act: Callable[[], object]) -> Iterator[None]:
    """Ctrl+C while a command runs off the prompt acts once it has finished: a call cut off
    halfway would leave the command half done (a child forked, its turn never shown)."""
    pressed = False

    def note(signum: int, frame: FrameType | None) -> None:
        nonlocal pressed
        pressed = True

    previous = signal.signal(signal.SIGINT, note)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if pressed:
            act()


class LiveRepl(Repl):
    """A terminal: a prompt_toolkit prompt with Tab completion that stays live during turns,
    which a TurnRunner streams on a thread of its own."""

    def __init__(self, grove: GroveAPI, session: str) -> None:
        from grove.cli.completion import chat_completer
        from grove.providers.catalog import completions
        from grove.supervisor.commands.bus import registry

        self.grove = grove
        self.session = session
        self.output = LiveOutput(sys.stdout)
        self.writer = TurnWriter(self.output, styles=True)
        self.status = StatusLine(grove, session, self.output.redraw)
        self.turns = TurnRunner(grove, session, self.writer, self.status)
        self._label = PROMPT  # what the prompt asks: "> ", or a command's confirmation
        self._confirming = False
        self._question: str | None = None  # an approval question waiting for a key
        self._answer = "n"
        self._answered = threading.Event()
        self._asking = threading.Lock()  # one question at a time
        self._leaving = False
        self.input: PromptSession[str] = PromptSession(
            message=self._message,
            completer=chat_completer(registry().names(), completions()),  # type: ignore[arg-type]
            complete_while_typing=False,
            key_bindings=self._keys(),
            bottom_toolbar=self.status.text,
        )
        grove.set_approver(session, self.ask_person)

    def _message(self) -> StyleAndTextTuples:
        """The line being streamed and an approval question, above the prompt itself."""
        app = get_app()
        if app.is_done:  # what stays on screen once a line is entered
            return [("", self._label)]
        question = [("", f"{self._question}\n")] if self._question is not None else []
        return [
            *self.output.unfinished(app.output.get_size().columns),
            *question,
            ("", self._label),
        ]

    def _keys(self) -> KeyBindings:
        keys = KeyBindings()
        asking = Condition(lambda: self._question is not None)
        streaming = Condition(lambda: self.turns.streaming)

        def _answer(event: KeyPressEvent) -> None:
            self._answer = ANSWER_KEYS.get(event.data.lower(), "n")
            self._answered.set()

        # Keys a person types, one by one: Keys.Any would take a terminal's own reports too.
        for key in (*TYPED_KEYS, "enter", "escape", "c-d"):
            keys.add(key, filter=asking, eager=True)(_answer)

        # Ctrl+C is a key while the prompt reads raw, a SIGINT while lines are written above
        # it (the terminal is cooked then): both cancel, neither ends the chat.
        @keys.add("c-c")
        @keys.add(Keys.SIGINT)
        def _interrupt(event: KeyPressEvent) -> None:
            if self._question is not None:
                self._answer = "n"
                self._answered.set()
            elif self._confirming:
                event.app.exit(result="")
            elif not (self.turns.streaming and self._cancel_turn()):
                self._clear(event)

        @keys.add("escape", filter=streaming & ~asking)
        def _escape(event: KeyPressEvent) -> None:
            self._cancel_turn()

        @keys.add(Keys.BracketedPaste, eager=True)
        def _paste(event: KeyPressEvent) -> None:
            data = event.data.replace("\r\n", "\n").replace("\r", "\n")
            refusal = too_long(event.current_buffer.text + data)
            if refusal is not None:
                self.writer.line(refusal, error=True)
            else:
                event.current_buffer.insert_text(data)

        return keys

    def _cancel_turn(self) -> bool:
        """Cancel the streaming turn, holding the queue; False when its cancel was asked for
        already (or it has ended)."""
        agent = self.turns.cancel()
        if agent is None:
            return False
        threading.Thread(target=self._cancel, args=(agent,), daemon=True).start()
        return True

    def _cancel(self, agent: str) -> None:
        try:
            self.grove.cancel(agent)
        except GroveError as exc:
            self.writer.line(f"Cannot cancel the turn: {exc}", error=True)

    def _clear(self, event: KeyPressEvent) -> None:
        """Ctrl+C with no turn to cancel: the line typed goes, else the queued prompts."""
        if event.current_buffer.text:
            event.current_buffer.reset()
        elif dropped := self.turns.clear():
            self.writer.line(f"Dropped {counted(dropped, 'queued prompt')}")

    def ask_person(self, request: ApprovalRequest) -> str:
        """y, n or a(lways, for this session): the next key typed answers, asked while the
        turn streams (on the turn's thread)."""
        question = printable(f"Allow {request.tool}? [y/n/a] ")
        self.writer.line(f"{request.tool} wants to run with {request.arguments}")
        with self._asking:
            if self._leaving:
                answer = "n"
            else:
                self._answered.clear()
                self._question = question
                self.output.redraw()
                while not self._answered.wait(LEAVING_CHECK_S) and not self._leaving:
                    pass
                answered = self._answered.is_set()
                self._question, answer = None, self._answer if answered else "n"
        self.writer.line(question + answer)
        return answer

    def run(self) -> None:
        self.status.refresh()
        with patch_stdout(raw=True):  # stray writes (a warning, a log line) go above too
            try:
                while True:
                    try:
                        line = self._read().strip()
                    except EOFError:
                        break
                    if not line:
                        self._send_held()
                        continue
                    with deferred_interrupts(self._cancel_turn):
                        if self.handle(line):
                            break
            finally:
                self._leave()

    def _read(self) -> str:
        try:
            return self.input.prompt(pre_run=self.output.attach)
        finally:
            self.output.detach()

    def _send_held(self) -> None:
        """Enter at an empty prompt sends a queue a cancel held."""
        if self.turns.held and (count := self.turns.release()):
            self.writer.line(f"Sending {counted(count, 'queued prompt')}")

    def _leave(self) -> None:
        """The chat ends once the streaming turn has (Ctrl+C cancels it); queued prompts are
        not sent."""
        self._leaving = True  # a question asked from now on, or waiting, is answered no
        dropped = self.turns.clear()
        unsent = f"{counted(dropped, 'queued prompt')} not sent" if dropped else ""
        if self.turns.streaming:
            unsent = f"; {unsent}" if unsent else ""
            self.writer.line(f"Leaving when this turn ends (Ctrl+C cancels it){unsent}")
        elif unsent:
            self.writer.line(unsent)
        self.output.plain()
        while True:
            try:
                self.turns.finish()
                return
            except KeyboardInterrupt:
                agent = self.turns.cancel()
                if agent is not None:
                    self._cancel(agent)

    def edit(self) -> tuple[str, bool]:
        with self.output.held():
            return edit_todo(self.grove, self.session)

    def report(self, text: str, ok: bool) -> None:
        self.writer.line(text, error=not ok)

    def command(self, line: str) -> bool:
        """Run one command at once, a turn streaming or not; its turn (`/fork PROMPT`) is
        followed after the one streaming."""
        try:
            outcome = self.grove.dispatch(self.session, line, ORIGIN)
            confirm = outcome.data.get("confirm")
            if confirm:
                question = outcome.text.split(". ")[0]
                if not self._confirmed(f"{question}. Proceed? [y/N] "):
                    self.writer.line("Not confirmed")
                    return False
                outcome = self.grove.dispatch(self.session, str(confirm), ORIGIN)
        except GroveError as exc:
            self.writer.line(str(exc), error=True)
            return False
        self.writer.line(outcome.text, error=not outcome.ok)
        turn = self.grove.command_turn(outcome)
        if turn is not None:
            self.turns.follow(turn)
        self.status.refresh()
        return bool(outcome.data.get("exit"))

    def _confirmed(self, question: str) -> bool:
        self._label, self._confirming = printable(question), True
        try:
            answer = self._read()
        except EOFError:
            answer = ""
        finally:
            self._label, self._confirming = PROMPT, False
        return answer.strip().lower() in ("y", "yes")

    def prompt(self, text: str) -> None:
        refusal = too_long(text)
        if refusal is not None:
            self.writer.line(refusal, error=True)
            return
        place = self.turns.submit(text)
        if place:
            self.writer.line(f"Queued #{place}: sent when the turn before it ends")
