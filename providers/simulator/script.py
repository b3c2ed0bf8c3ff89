"""Reply planning: from what a request asked (`Inbound`) to what the simulator answers (`Plan`).

Vendor-neutral: the wire modules read requests into `Inbound` and write a `Plan` in their
own JSON; no HTTP and no vendor field names live here.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
from dataclasses import dataclass
from typing import Any

from providers.simulator.config import SimulatorConfig
from providers.simulator.directives import (
    Audience,
    Directive,
    DirectiveError,
    FaultKind,
    parse_directives,
)

REVIEWER_TOOL = "advise"
ARGUMENT_CHUNK_CHARS = 8
_WORDS = (
    "the", "agent", "reads", "a", "plan", "and", "tests", "each", "step", "with", "care",
    "while", "models", "stream", "tokens", "to", "its", "tree", "of", "forks", "review",
    "notes", "quietly", "green", "river", "stone", "bright", "signal", "under", "open",
    "sky", "small", "steady", "answer", "for", "every", "question", "in", "time", "then",
    "writes", "clear", "words", "about", "work", "done", "well", "today", "new", "path",
    "simple", "light", "careful", "moves", "across", "many", "paths", "toward", "calm",
    "shared", "state", "ready", "again", "now",
)  # fmt: skip
_DELTA = re.compile(r"\s*\S+")


@dataclass(frozen=True, kw_only=True, slots=True)
class Inbound:
    """A request in no vendor's terms. `prompt` is the last user message's text, or, when
    that message holds only tool results, the results' text. `body` is the parsed JSON."""

    model: str
    prompt: str
    offered_tools: frozenset[str]
    thinking: bool
    stream: bool
    input_tokens: int
    body: dict[str, Any]

    @property
    def audience(self) -> Audience:
        """Reviewers are the requests that offer the `advise` tool (SPEC.md section 4)."""
        return "reviewer" if REVIEWER_TOOL in self.offered_tools else "agent"


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]
    argument_chunks: tuple[str, ...]

    @property
    def arguments_json(self) -> str:
        return "".join(self.argument_chunks)


@dataclass(frozen=True, kw_only=True, slots=True)
class Fault:
    kind: FaultKind
    retry_after: float | None = None
    after: int = 0


@dataclass(frozen=True, kw_only=True, slots=True)
class Plan:
    """What to answer. Each entry of `thinking` and `text` is one streamed delta (one token)."""

    thinking: tuple[str, ...]
    text: tuple[str, ...]
    tool_call: ToolCall | None
    fault: Fault | None
    headers_s: float
    ttft_s: float
    tps: float
    signature: str

    @property
    def thinking_text(self) -> str:
        return "".join(self.thinking)

    @property
    def reply_text(self) -> str:
        return "".join(self.text)

    @property
    def thinking_tokens(self) -> int:
        return len(self.thinking)

    @property
    def answer_tokens(self) -> int:
        """Output tokens besides thinking: text deltas and tool-argument chunks."""
        tool_tokens = len(self.tool_call.argument_chunks) if self.tool_call else 0
        return len(self.text) + tool_tokens

    @property
    def content_events(self) -> int:
        return self.thinking_tokens + self.answer_tokens


class Planner:
    """Turns requests into plans. Holds the `times=N` counts, shared by every connection."""

    def __init__(self, config: SimulatorConfig) -> None:
        self._config = config
        self._fault_counts: dict[str, int] = {}
        self._lock = threading.Lock()

    def plan(self, inbound: Inbound) -> Plan:
        """Raises `DirectiveError` for a malformed directive or a tool the request lacks."""
        directed = parse_directives(inbound.prompt)
        directive = directed.for_audience(inbound.audience)
        seed = " ".join(directed.text.split())
        tokens = self._config.tokens
        if directive is not None and directive.tokens is not None:
            tokens = directive.tokens
        thinking: tuple[str, ...] = ()
        if inbound.thinking:
            scripted = directive.thinking if directive is not None else None
            thinking = (
                split_deltas(scripted)
                if scripted is not None
                else generated_words("thinking about: " + seed, tokens)
            )
        tool_call = self._tool_call(directive, inbound)
        if directive is not None and directive.reply is not None:
            text = split_deltas(directive.reply)
        elif tool_call is not None:
            text = ()
        else:
            text = generated_words(seed, tokens)
        ttft_ms = self._config.ttft_ms
        tps = self._config.tps
        headers_ms = 0.0
        if directive is not None:
            headers_ms = directive.headers_ms or 0.0
            ttft_ms = directive.ttft_ms if directive.ttft_ms is not None else ttft_ms
            tps = directive.tps if directive.tps is not None else tps
        return Plan(
            thinking=thinking,
            text=text,
            tool_call=tool_call,
            fault=self._fault(directive),
            headers_s=headers_ms / 1000.0,
            ttft_s=ttft_ms / 1000.0,
            tps=tps,
            signature=opaque_token("signature", "".join(thinking), 96),
        )

    def _tool_call(self, directive: Directive | None, inbound: Inbound) -> ToolCall | None:
        if directive is None or directive.tool is None:
            return None
        if directive.tool not in inbound.offered_tools:
            offered = ", ".join(sorted(inbound.offered_tools)) or "none"
            raise DirectiveError(
                f"directive asks for tool '{directive.tool}', which this request does not "
                f"offer (offered: {offered})"
            )
        arguments = directive.args or {}
        encoded = json.dumps(arguments, separators=(",", ":"), ensure_ascii=False)
        chunks = tuple(
            encoded[i : i + ARGUMENT_CHUNK_CHARS]
            for i in range(0, len(encoded), ARGUMENT_CHUNK_CHARS)
        )
        return ToolCall(name=directive.tool, arguments=arguments, argument_chunks=chunks)

    def _fault(self, directive: Directive | None) -> Fault | None:
        if directive is None or directive.fault is None:
            return None
        if directive.times is not None:
            with self._lock:
                hits = self._fault_counts.get(directive.source, 0)
                if hits >= directive.times:
                    return None
                self._fault_counts[directive.source] = hits + 1
        return Fault(
            kind=directive.fault, retry_after=directive.retry_after, after=directive.after or 0
        )


def split_deltas(text: str) -> tuple[str, ...]:
    """One delta per word, each with the whitespace before it; joined they give `text`."""
    deltas = _DELTA.findall(text)
    rest = text[sum(len(delta) for delta in deltas) :]
    if rest:
        if deltas:
            deltas[-1] += rest
        else:
            deltas.append(rest)
    return tuple(deltas)


def generated_words(seed: str, count: int) -> tuple[str, ...]:
    """`count` deterministic words drawn from a hash of `seed`: a sentence ending in '.'."""
    if count <= 0:
        return ()
    digest = hashlib.shake_256(seed.encode("utf-8", "surrogatepass")).digest(2 * count)
    words = [
        _WORDS[int.from_bytes(digest[2 * i : 2 * i + 2], "big") % len(_WORDS)] for i in range(count)
    ]
    words[0] = words[0].capitalize()
    words[-1] += "."
    return (words[0], *(" " + word for word in words[1:]))


def opaque_token(purpose: str, text: str, size: int) -> str:
    """A deterministic base64 blob standing in for a vendor's signature or encrypted data."""
    material = f"{purpose}:{text}".encode("utf-8", "surrogatepass")
    return base64.b64encode(hashlib.shake_256(material).digest(size)).decode("ascii")


def estimate_tokens(value: object) -> int:
    """About one token per four characters of every string in a request body."""
    return max(1, (_string_chars(value) + 3) // 4)


def _string_chars(value: object) -> int:
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return sum(_string_chars(item) for item in value.values())
    if isinstance(value, list):
        return sum(_string_chars(item) for item in value)
    return 0
