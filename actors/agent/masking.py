"""Secrets masked in what a turn leaves behind: its entries before they are stored (and the
events made of them), and what it streams, as each reader of the stream reads it.

The agent's own history keeps what the model and the tools said: the model sees its own text
and the tools run with their arguments as given; only copies that leave the turn are masked.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from grove.actors.turn_result import NewEntry
from grove.providers.secrets import StreamMask, mask

_STREAMED_KINDS = ("text", "thinking")  # what streams a reply's text, a piece at a time


def masked_entry(entry: NewEntry) -> NewEntry:
    """`entry` with its text and its parts' texts, tool arguments and results masked; the
    same entry when nothing in it is secret. A text the entry holds twice (a reply's content
    is its text part's too) is masked once."""
    content = mask(entry.content)
    known = {entry.content: content}

    def masked(text: str) -> str:
        shown = known.get(text)
        if shown is None:
            shown = known[text] = mask(text)
        return shown

    parts = entry.data.get("parts")
    masked_parts = [_masked_part(p, masked) for p in parts] if isinstance(parts, list) else parts
    if content == entry.content and masked_parts == parts:
        return entry
    return replace(entry, content=content, data={**entry.data, "parts": masked_parts})


def _masked_part(part: Any, masked: Callable[[str], str]) -> Any:
    if not isinstance(part, dict):
        return part
    kind = part.get("kind")
    if kind == "text" and isinstance(part.get("text"), str):
        return {**part, "text": masked(part["text"])}
    if kind == "tool_result" and isinstance(part.get("content"), str):
        return {**part, "content": masked(part["content"])}
    if kind == "tool_call":
        return {**part, "arguments": _masked_json(part.get("arguments"))}
    if kind == "thinking" and isinstance(part.get("text"), str):
        text = masked(part["text"])
        if text == part["text"]:
            return part
        # Its signature (and a provider's copy of it) vouched for the text as it was: masked,
        # it is kept to read but no longer sent back.
        return {**part, "text": text, "signature": None, "provider_data": None}
    return part


def _masked_json(value: Any) -> Any:
    """JSON data with every string in it masked, walked without recursion."""
    if isinstance(value, str):
        return mask(value)
    if not isinstance(value, dict | list):
        return value
    root: list[Any] = [value]
    pending: list[tuple[Any, Any]] = [(root, 0)]
    while pending:
        holder, key = pending.pop()
        item = holder[key]
        if isinstance(item, str):
            holder[key] = mask(item)
        elif isinstance(item, dict):
            copy = dict(item)
            holder[key] = copy
            pending.extend((copy, name) for name in copy)
        elif isinstance(item, list):
            copy_list = list(item)
            holder[key] = copy_list
            pending.extend((copy_list, index) for index in range(len(copy_list)))
    return root[0]


class MaskedReading:
    """What one reader of a turn's stream is shown of its `(kind, text)` items: text and
    thinking masked as they come (a key split between items is held until it is whole:
    providers/secrets.py StreamMask), any other item after what was held. The host keeps
    the deltas as the model sent them and masks only what is read: a turn nobody reads
    (a fan-out's children) masks nothing it streams, and a reader masks a chunk at a time."""

    def __init__(self) -> None:
        self._stream = StreamMask()
        self._held_kind: str | None = None  # the kind of the text held back

    def shown(self, items: Iterable[tuple[str, str]], ended: bool) -> list[tuple[str, str]]:
        """`items` as this reader sees them; `ended`: the turn is over, nothing is held back."""
        shown: list[tuple[str, str]] = []
        for kind, text in items:
            if kind in _STREAMED_KINDS:
                if kind != self._held_kind:
                    self._release(shown)  # thinking ends where text begins
                    self._held_kind = kind
                piece = self._stream.feed(text)
                if piece:
                    shown.append((kind, piece))
            else:
                self._release(shown)
                shown.append((kind, text))
        if ended:
            self._release(shown)
        return shown

    def _release(self, shown: list[tuple[str, str]]) -> None:
        """What the text held back, masked, joins `shown`."""
        held = self._stream.flush()
        if held and self._held_kind is not None:
            shown.append((self._held_kind, held))
        self._held_kind = None
