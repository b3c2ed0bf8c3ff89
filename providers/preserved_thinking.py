"""Preserved thinking on the Anthropic wire: each thinking block Claude 5.5 and Fable return is
bound to its model and prefix, and a request sends back only the blocks still bound to it.

A reply's blocks are stamped with the model and a fingerprint of the request (`stamped`); a
request leaves out every block another model made or whose prefix changed since (`bound`).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import replace
from functools import cache
from typing import Any

from grove.providers.anthropic.request import wire_block
from grove.providers.base import (
    AssistantTurn,
    Message,
    Part,
    ProviderName,
    Request,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from grove.providers.catalog import model_info
from grove.providers.errors import ProviderError, ProviderHTTPError, UnknownModelError
from grove.providers.output import output_mode

BOUND_MARK = "The block is bound to a different conversation"
_BOUND_WHERE = re.compile(r"messages\.(\d+)\.content\.(\d+)")


@cache
def preserves_thinking(model: str) -> bool:
    """Whether `model` binds its thinking blocks to their prefix and to itself (the catalog's
    `preserved_thinking`: Claude 5.5 and Fable)."""
    try:
        return model_info(model, "anthropic").preserved_thinking
    except UnknownModelError:
        return False


class Prefix:
    """The fingerprint of all a request sends, which its reply's thinking blocks are bound
    to (`digest`): made when first read, as most replies have no thinking to stamp; equal
    when their digests are."""

    __slots__ = ("_digest", "_request")

    def __init__(self, request: Request, digest: str | None = None) -> None:
        self._request = request
        self._digest = digest

    @property
    def digest(self) -> str:
        if self._digest is None:
            self._digest = _fingerprint(self._request)
        return self._digest

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Prefix) and self.digest == other.digest

    def __hash__(self) -> int:
        return hash(self.digest)


def bound(provider: ProviderName, request: Request) -> tuple[Request, Prefix | None]:
    """`request` without the thinking its model would refuse (made by another model, or
    under another prefix: system, tools or an earlier part changed, or an earlier block was
    left out), and the fingerprint of all it sends, which its reply's blocks are bound to.
    A tool loop whose last reply so loses its leading thinking is closed (`_closed`): the
    model thinks on every request, and a tool loop must then start with thinking. Unchanged,
    with None, for a model that does not preserve thinking."""
    if provider != "anthropic" or not preserves_thinking(request.model):
        return request, None
    if not any(isinstance(p, ThinkingPart) for m in request.messages for p in m.parts):
        return request, Prefix(request)  # nothing to leave out: read its prefix only if asked
    kept, prefix = _kept(request)
    if kept is not request and (closed := _closed(request, kept)) is not None:
        return closed, Prefix(closed)
    return kept, Prefix(kept, prefix)


def _kept(request: Request) -> tuple[Request, str]:
    """`request` without the thinking no longer bound to it, and its fingerprint."""
    digest = _head(request)
    messages: list[Message] = []
    dropped = False
    for message in request.messages:
        parts = []
        for part in message.parts:
            block = wire_block(message, part)
            if block is None:
                parts.append(part)
                continue
            if isinstance(part, ThinkingPart) and (
                part.model != request.model or part.prefix != digest.hexdigest()
            ):
                dropped = True
                continue
            _add(digest, message.role, block)
            parts.append(part)
        messages.append(replace(message, parts=tuple(parts)) if dropped else message)
    kept = replace(request, messages=tuple(messages)) if dropped else request
    return kept, digest.hexdigest()


def _fingerprint(request: Request) -> str:
    digest = _head(request)
    for message in request.messages:
        for part in message.parts:
            if (block := wire_block(message, part)) is not None:
                _add(digest, message.role, block)
    return str(digest.hexdigest())


def _closed(original: Request, kept: Request) -> Request | None:
    """When `kept` ends in a tool loop whose last reply began with thinking in `original`
    and no longer does: `kept` with that reply's calls and their results told as text, so
    no tool loop is left open; None otherwise."""
    messages = list(kept.messages)
    if not messages or not any(isinstance(p, ToolResultPart) for p in messages[-1].parts):
        return None
    replies = [i for i, m in enumerate(messages) if m.role == "assistant"]
    if not replies or not _leads_with_thinking(original.messages[replies[-1]]):
        return None
    last = replies[-1]
    if _leads_with_thinking(messages[last]):
        return None
    told = [
        Message(role=message.role, parts=tuple(_told(part) for part in message.parts))
        for message in messages[last:]
    ]
    return replace(kept, messages=(*messages[:last], *told))


def _leads_with_thinking(message: Message) -> bool:
    sent = [part for part in message.parts if wire_block(message, part) is not None]
    return bool(sent) and isinstance(sent[0], ThinkingPart)


def _told(part: Part) -> Part:
    """A tool call or result as text (other parts as they are)."""
    if isinstance(part, ToolCallPart):
        arguments = json.dumps(part.arguments, ensure_ascii=False)
        return TextPart(text=f"[called {part.name} {arguments}]")
    if isinstance(part, ToolResultPart):
        outcome = "failed" if part.is_error else "returned"
        return TextPart(text=f"[{part.name} {outcome}] {part.content}")
    return part


def stamped(turn: AssistantTurn, prefix: Prefix | None) -> AssistantTurn:
    """The reply with each thinking block bound to its model and the request's `prefix`."""
    if prefix is None or not any(isinstance(p, ThinkingPart) for p in turn.message.parts):
        return turn
    digest = prefix.digest
    parts = tuple(
        replace(part, model=turn.model, prefix=digest) if isinstance(part, ThinkingPart) else part
        for part in turn.message.parts
    )
    return replace(turn, message=replace(turn.message, parts=parts))


def unbound(request: Request, error: ProviderError) -> tuple[Request, str] | None:
    """For a 400 saying a thinking block is bound to another conversation: `request` without
    that block and every later one, and where it was; None for any other error."""
    if not isinstance(error, ProviderHTTPError) or error.status != 400:
        return None
    text = f"{error} {error.body}"
    if BOUND_MARK not in text:
        return None
    found = _BOUND_WHERE.search(text)
    where = found.group(0) if found else "messages.0.content.0"
    first = int(found.group(1)) if found else 0
    messages: list[Message] = []
    wire_index, last_role = -1, None
    for message in request.messages:
        sent = any(wire_block(message, part) is not None for part in message.parts)
        if sent and message.role != last_role:
            wire_index, last_role = wire_index + 1, message.role
        if wire_index >= first:
            parts = tuple(p for p in message.parts if not isinstance(p, ThinkingPart))
            message = replace(message, parts=parts)
        messages.append(message)
    return replace(request, messages=tuple(messages)), where


def dropped_text(where: str) -> str:
    return (
        f"── thinking from {where} on was bound to a different conversation; "
        "sent again without it ──"
    )


def _head(request: Request) -> Any:
    """A running digest holding what comes before the messages: system prompt, tools, and
    a typed answer asked through a tool (which adds that tool and changes the system prompt;
    the native `output_config.format` is no part of a prefix)."""
    digest = hashlib.sha256()
    output = request.output
    by_tool = output is not None and output_mode("anthropic", request) == "tool"
    head = [
        request.system,
        [[tool.name, tool.description, tool.parameters] for tool in request.tools],
        [output.name, output.schema] if output is not None and by_tool else None,
    ]
    digest.update(_canonical(head))
    return digest


def _add(digest: Any, role: str, block: dict[str, Any]) -> None:
    digest.update(_canonical([role, block]))


# One encoder for every fingerprint (json.dumps with options makes one per call).
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _canonical(value: object) -> bytes:
    return _CANONICAL.encode(value).encode("utf-8", "surrogatepass") + b"\n"
