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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from grove.providers.images import image_tokens, png_size
from grove.simulator.caching import CacheUse, PromptPrefixes
from grove.simulator.config import SimulatorConfig
from grove.simulator.directives import (
    Audience,
    DirectedText,
    Directive,
    DirectiveError,
    FaultKind,
    ScriptedCall,
    parse_directives,
)
from grove.simulator.schema_json import json_for, malformed_for

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
Entry = Literal["text", "reply", "results"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Structured:
    """A request for a typed answer: JSON of `schema`, as the reply's text, or as the
    arguments of a call to `tool` when the request forces one (a final-answer tool)."""

    schema: dict[str, Any]
    tool: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Inbound:
    """A request in no vendor's terms. `prompt` is the last user message's text, or, when
    that message holds only tool results, the results' text. `script` is the text of the last
    user message that carries text, and `step` counts the replies since it, this one included
    (`locate_script`). `body` is the parsed JSON; `prefixes` the prompt as its cache sees it."""

    model: str
    prompt: str
    script: str
    step: int
    offered_tools: frozenset[str]
    thinking: bool
    stream: bool
    input_tokens: int
    body: dict[str, Any]
    prefixes: PromptPrefixes = field(default_factory=PromptPrefixes)
    structured: Structured | None = None
    invalid_left: int = 0  # `invalid_output`: malformed answers still to give

    @property
    def max_output(self) -> int | None:
        """The request's cap on output tokens, under whichever name its wire gives it."""
        body = self.body
        config = body.get("generationConfig")
        for cap in (
            body.get("max_tokens"),
            body.get("max_completion_tokens"),
            body.get("max_output_tokens"),
            config.get("maxOutputTokens") if isinstance(config, dict) else None,
        ):
            if isinstance(cap, int) and not isinstance(cap, bool) and cap > 0:
                return cap
        return None

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
    """What to answer. Each entry of `thinking` and `text` is one streamed delta (one token);
    `tool_calls` are made in one reply, in order."""

    thinking: tuple[str, ...]
    text: tuple[str, ...]
    tool_calls: tuple[ToolCall, ...]
    fault: Fault | None
    headers_s: float
    ttft_s: float
    tps: float
    signature: str
    cut_off: bool = False  # ended by the output limit (`stop=length`)
    # What the prompt read from caches and wrote to them.
    cache: CacheUse = field(default_factory=CacheUse)

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
        return len(self.text) + sum(len(call.argument_chunks) for call in self.tool_calls)

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
        directive = _applying(inbound, directed)
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
        tool_calls = _tool_calls(directive, inbound)
        structured = inbound.structured
        if directive is not None and directive.reply is not None:
            text = split_deltas(directive.reply)
        elif tool_calls:
            text = ()
        elif structured is not None:
            answer = _structured_answer(structured, inbound, f"{seed}|{inbound.step}")
            if isinstance(answer, ToolCall):
                text, tool_calls = (), (answer,)
            else:
                text = answer
        else:
            text = generated_words(seed, tokens)
        cut_off = directive is not None and directive.stop == "length"
        cap = inbound.max_output
        if cap is not None and len(thinking) + len(text) > cap:  # as a provider stops at it
            text = text[: max(cap - len(thinking), 0)]
            cut_off = True
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
            tool_calls=tool_calls,
            fault=self._fault(directive),
            headers_s=headers_ms / 1000.0,
            ttft_s=ttft_ms / 1000.0,
            tps=tps,
            signature=opaque_token("signature", "".join(thinking), 96),
            cut_off=cut_off,
        )

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


def _structured_answer(
    structured: Structured, inbound: Inbound, seed: str
) -> tuple[str, ...] | ToolCall:
    """JSON made from the schema, as text deltas, or as a call to the forced tool; malformed
    while `invalid_output` says so."""
    as_call = structured.tool is not None
    if inbound.invalid_left > 0:
        text = malformed_for(structured.schema, seed, as_object=as_call)
    else:
        text = json.dumps(json_for(structured.schema, seed), ensure_ascii=False)
    if structured.tool is not None:
        return _tool_call(ScriptedCall(name=structured.tool, args=json.loads(text)))
    return tuple(
        text[i : i + ARGUMENT_CHUNK_CHARS] for i in range(0, len(text), ARGUMENT_CHUNK_CHARS)
    )


def invalid_answers_left(entries: Sequence[tuple[Entry, str]]) -> int:
    """How many malformed answers `[[sim invalid_output=N]]` still asks for: N, less one for
    each user message after the message that carries it, text or tool results (an answer sent
    back with its problems, as Grove does in text and pydantic-ai as a tool result)."""
    left = 0
    for kind, text in entries:
        asked = _invalid_output(text) if kind == "text" else None
        if asked is not None:
            left = asked
        elif kind != "reply":
            left = max(left - 1, 0)
    return left


def _invalid_output(text: str) -> int | None:
    if "invalid_output=" not in text:
        return None
    try:
        directives = parse_directives(text).directives
    except DirectiveError:
        return None  # the reply to it reports the error
    found = [d.invalid_output for d in directives if d.invalid_output and d.audience == "agent"]
    return found[-1] if found else None


def locate_script(entries: Iterable[tuple[Entry, str]]) -> tuple[str, int]:
    """The script and the step, from a conversation's entries in order: user text ("text",
    with that text), model output ("reply") and tool results ("results"). The script is the
    last text; the step is 1 + the replies after it, where a run of replies with nothing
    between them is one (the Responses API lists one reply as several items)."""
    script = ""
    step = 1
    previous: Entry | None = None
    for kind, text in entries:
        if kind == "text":
            script, step = text, 1
        elif kind == "reply" and previous != "reply":
            step += 1
        previous = kind
    return script, step


def _applying(inbound: Inbound, prompt: DirectedText) -> Directive | None:
    """The directive for this reply: the script's for this step, else the step-less ones in
    the prompt (the tool results, or the script itself when no result follows it)."""
    script = prompt if inbound.script == inbound.prompt else parse_directives(inbound.script)
    steps = {None, 1} if inbound.step == 1 else {inbound.step}
    scripted = script.last(inbound.audience, steps, inbound.model)
    return (
        scripted if scripted is not None else prompt.last(inbound.audience, {None}, inbound.model)
    )


def _tool_calls(directive: Directive | None, inbound: Inbound) -> tuple[ToolCall, ...]:
    if directive is None:
        return ()
    for call in directive.scripted_calls:
        if call.name not in inbound.offered_tools:
            offered = ", ".join(sorted(inbound.offered_tools)) or "none"
            raise DirectiveError(
                f"directive asks for tool '{call.name}', which this request does not "
                f"offer (offered: {offered})"
            )
    return tuple(_tool_call(call) for call in directive.scripted_calls)


def _tool_call(call: ScriptedCall) -> ToolCall:
    encoded = json.dumps(call.args, separators=(",", ":"), ensure_ascii=False)
    chunks = tuple(
        encoded[i : i + ARGUMENT_CHUNK_CHARS] for i in range(0, len(encoded), ARGUMENT_CHUNK_CHARS)
    )
    return ToolCall(name=call.name, arguments=call.args, argument_chunks=chunks)


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


def estimate_tokens(value: object, provider: str = "anthropic") -> int:
    """About one token per four characters of every string in a request body, and each image
    block as `provider` bills it (not its base64 text)."""
    chars, images = _walk(value)
    return max(1, (chars + 3) // 4 + sum(image_tokens(provider, *png_size(i)) for i in images))


def _walk(value: object) -> tuple[int, list[str]]:
    """The characters of every string in `value` outside image blocks, and those blocks'
    data. Walked with a stack: a body with tool schemas is read for every request."""
    total, images, pending = 0, [], [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            total += len(item)
        elif isinstance(item, dict):
            data = _image_data(item)
            if data is None:
                pending.extend(item.values())
            else:
                images.append(data)
        elif isinstance(item, list):
            pending.extend(item)
    return total, images


def _image_data(block: dict[str, Any]) -> str | None:
    """The base64 data (or data URL) of an image block of any of the four wires."""
    kind = block.get("type")
    source = block.get("source")
    if kind == "image" and isinstance(source, dict):
        return str(source.get("data", ""))
    if kind == "input_image":
        return str(block.get("image_url", ""))
    url = block.get("image_url")
    if kind == "image_url" and isinstance(url, dict):
        return str(url.get("url", ""))
    if "data" in block and ("mime_type" in block or "mimeType" in block):
        return str(block["data"])
    return None
