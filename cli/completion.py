"""Tab completion for the chat REPL: command names, and models after `/model ` or `--model `.

`candidates` is pure (tested directly); `ChatCompleter` adapts it to prompt_toolkit.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prompt_toolkit.completion import CompleteEvent, Completion
    from prompt_toolkit.document import Document

MODEL_PREFIXES = ("/model ", "/fork --model ")


def candidates(text: str, commands: Sequence[str], models: Sequence[str]) -> tuple[str, list[str]]:
    """The word being completed at the end of `text` and what may replace it."""
    for prefix in MODEL_PREFIXES:
        if text.startswith(prefix):
            word = text[len(prefix) :]
            if " " in word:
                return word, []
            return word, [m for m in models if m.startswith(word)]
    if text.startswith("/") and " " not in text:
        word = text[1:]
        return text, [f"/{name}" for name in commands if name.startswith(word)]
    return text, []


def chat_completer(commands: Sequence[str], models: Sequence[str]) -> object:
    """A prompt_toolkit Completer over `candidates` (imported here: prompt_toolkit is heavy)."""
    from prompt_toolkit.completion import Completer, Completion

    class ChatCompleter(Completer):
        def get_completions(
            self, document: Document, complete_event: CompleteEvent
        ) -> Iterable[Completion]:
            word, found = candidates(document.text_before_cursor, commands, models)
            for item in found:
                yield Completion(item, start_position=-len(word))

    return ChatCompleter()
