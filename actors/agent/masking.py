"""Secrets masked in what a turn leaves behind: its entries before they are stored (and the
events made of them), and what it streams to whoever watches, a delta at a time.

The agent's own history keeps what the model and the tools said: the model sees its own text
and the tools run with their arguments as given; only copies that leave the turn are masked.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from grove.actors.turn_result import NewEntry
from grove.providers.secrets import StreamMask, mask
from grove.providers.stream_events import StreamEvent, TextDelta, ThinkingDelta

_DELTAS = (TextDelta, ThinkingDelta)  # a tuple: `A | B` would be built at every delta


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


class MaskedEmit:
    """An emitter that masks the reply's text and thinking deltas as they stream (a key split
    between deltas is held until it is whole: providers/secrets.py StreamMask) and passes the
    other events on, after what it held. `flush` when the turn ends."""

    def __init__(self, emit: Callable[[Any], None]) -> None:
        self._emit = emit
        self._stream = StreamMask()
        self._last: TextDelta | ThinkingDelta | None = None  # the last delta, of the held text

    def __call__(self, event: StreamEvent | Any) -> None:
        if isinstance(event, _DELTAS):
            last = self._last
            if last is not None and type(last) is not type(event):
                self.flush()  # thinking ends where text begins
            self._last = event
            text = event.text
            shown = self._stream.feed(text)
            if shown == text:  # most deltas: a few whole words, nothing secret
                self._emit(event)
            elif shown:  # built anew: dataclasses.replace costs more than the masking
                self._emit(type(event)(index=event.index, text=shown))
            return
        self.flush()
        self._emit(event)

    def flush(self) -> None:
        """Show what the deltas held back, masked."""
        held = self._stream.flush()
        if held and self._last is not None:
            self._emit(type(self._last)(index=self._last.index, text=held))
        self._last = None
