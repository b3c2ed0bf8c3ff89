"""Anthropic cache breakpoints: where Grove puts `cache_control` in a Messages body.

At most four a request (the API's limit), none where the prefix is shorter than the model's
minimum cacheable length. Pure functions over the body that request.py built.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from grove.providers.base import CachePolicy, JSONObject

MAX_BREAKPOINTS = 4
# The API looks for an earlier entry at most this many blocks before a breakpoint.
LOOKBACK_BLOCKS = 20
# Set on a wire block that ends a shared prefix (a `CachePoint` followed it); never sent.
FORK_MARK = "__grove_fork_point__"
CHARS_PER_TOKEN = 4
IMAGE_TOKENS = 1_600  # about what a picture of a page costs; enough to weigh prefixes
MARKABLE = frozenset({"text", "image", "tool_use", "tool_result", "document"})


@dataclass(frozen=True, slots=True)
class _Slot:
    """One block of the prompt in the order the API reads it: tools, system, messages."""

    block: JSONObject
    tokens: int  # the prompt up to and including this block, estimated
    role: str  # "tools", "system", "user" or "assistant"


def place_breakpoints(body: JSONObject, policy: CachePolicy | None, min_tokens: int) -> None:
    """Put `cache_control` on up to four blocks of `body` (and take the fork marks out), in
    this order of worth: the tail (so the next step of a tool loop reads what this request
    writes), the previous request's tail when it lies beyond the look-back, the nearest fork
    point (siblings share it), the end of tools + system (the tree shares it), the fork
    points further up."""
    slots = list(_slots(body))
    forks = [index for index, slot in enumerate(slots) if slot.block.pop(FORK_MARK, False)]
    if policy is None or not slots:
        return
    nearest, *outer = reversed(forks) if forks else (None,)
    wanted = [len(slots) - 1, _previous_tail(slots), nearest, _last_of(slots, ("tools", "system"))]
    wanted += outer
    chosen: list[int] = []
    for index in wanted:
        if index is None or index in chosen or slots[index].tokens < min_tokens:
            continue
        if slots[index].block.get("type", "text") not in MARKABLE:
            continue
        chosen.append(index)
        if len(chosen) == MAX_BREAKPOINTS:
            break
    control: JSONObject = {"type": "ephemeral"}
    if policy.ttl != "5m":
        control["ttl"] = policy.ttl
    for index in chosen:
        slot = slots[index]
        slot.block["cache_control"] = dict(control)
        if slot.role == "system" and isinstance(body.get("system"), str):
            body["system"] = [slot.block]  # only a block can carry the breakpoint


def _slots(body: JSONObject) -> Iterator[_Slot]:
    """Every block with the estimated prompt length up to it; a string system prompt as the
    one text block it stands for."""
    chars = 0
    for tool in body.get("tools") or ():
        chars += _chars(tool)
        yield _Slot(tool, chars // CHARS_PER_TOKEN, "tools")
    system = body.get("system")
    if isinstance(system, str) and system:
        chars += len(system)
        yield _Slot({"type": "text", "text": system}, chars // CHARS_PER_TOKEN, "system")
    for message in body.get("messages") or ():
        for block in message["content"]:
            chars += _chars(block)
            yield _Slot(block, chars // CHARS_PER_TOKEN, message["role"])


def _previous_tail(slots: list[_Slot]) -> int | None:
    """The last block of the user turn before the last assistant turn (what the previous
    request of a tool loop ended with), when the look-back from the tail cannot reach it."""
    last_assistant = _last_of(slots, ("assistant",))
    if last_assistant is None:
        return None
    previous = _last_of(slots[:last_assistant], ("user",))
    if previous is None or len(slots) - 1 - previous < LOOKBACK_BLOCKS:
        return None
    return previous


def _last_of(slots: list[_Slot], roles: tuple[str, ...]) -> int | None:
    for index in range(len(slots) - 1, -1, -1):
        if slots[index].role in roles:
            return index
    return None


def _chars(value: Any) -> int:
    """The characters of every string in `value`; an image's data counts as a page's tokens."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        if value.get("type") == "base64" and "data" in value:
            return IMAGE_TOKENS * CHARS_PER_TOKEN
        return sum(_chars(item) for item in value.values())
    if isinstance(value, list):
        return sum(_chars(item) for item in value)
    return 0
