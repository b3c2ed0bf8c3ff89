"""The recorded-stream corpus of ../shared/conformance/ (or its copy in corpus/ here) and one
harness to parse it.

Each wire module's conformance test feeds the corpus through SSEDecoder, its parser and the
shared TurnAccumulator, whole, byte by byte and split at every offset.
"""

from __future__ import annotations

import codecs
import json
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from grove.providers.accumulate import INVALID_ARGUMENTS, TurnAccumulator, parse_arguments
from grove.providers.errors import ProviderError
from grove.providers.http import WireParser
from grove.providers.sse import ServerSentEvent, SSEDecoder

REPO_ROOT = Path(__file__).resolve().parents[2]
SHARED_DIR = Path(os.environ.get("GROVE_SHARED_DIR", REPO_ROOT.parent / "shared"))
# The reference corpus beside the checkout, else the copy of it kept here (a clone that
# stands alone, a CI machine without ../shared).
CONFORMANCE_DIR = next(
    path
    for path in (SHARED_DIR / "conformance", Path(__file__).parent / "corpus")
    if (path / "MANIFEST.json").is_file()
)
LINE_END = re.compile(rb"\r\n|\r|\n")


@cache
def manifest() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((CONFORMANCE_DIR / "MANIFEST.json").read_text())
    return data


def entries(api: str) -> list[dict[str, Any]]:
    return [entry for entry in manifest()["entries"] if entry["api"] == api]


def entry_ids(api: str) -> list[str]:
    return [Path(entry["file"]).name for entry in entries(api)]


def body(entry: dict[str, Any]) -> bytes:
    path: Path = CONFORMANCE_DIR / entry["file"]
    return path.read_bytes()


def expected(entry: dict[str, Any]) -> dict[str, Any]:
    """The expected fields for a parser that flushes a last unterminated event (SPEC.md)."""
    return {**entry["expected"], **(entry.get("expected_if_flushed_at_eof") or {})}


@dataclass
class ParseOutcome:
    text: str
    thinking: str
    tool_calls: list[dict[str, Any]]
    stop_reason: str | None
    usage: dict[str, Any] | None
    completed: bool
    error: ProviderError | None
    sse_events: list[ServerSentEvent] = field(default_factory=list)


def decode_all(chunks: list[bytes]) -> list[ServerSentEvent]:
    decoder = SSEDecoder()
    events = [event for chunk in chunks for event in decoder.decode(chunk)]
    return events + decoder.flush()


def parse(new_parser: Callable[[], WireParser], chunks: list[bytes]) -> ParseOutcome:
    sse_events = decode_all(chunks)
    parser = new_parser()
    accumulator = TurnAccumulator("anthropic", "corpus")
    error: ProviderError | None = None
    try:
        for sse in sse_events:
            for event in parser.feed(sse):
                accumulator.add(event)
        for event in parser.finish():
            accumulator.add(event)
    except ProviderError as exc:
        error = exc
    return ParseOutcome(
        text=accumulator.text,
        thinking=accumulator.thinking,
        tool_calls=[
            {"name": name, "arguments": _lenient_arguments(raw, parsed)}
            for name, raw, parsed in accumulator.raw_tool_calls()
        ],
        stop_reason=accumulator.stop_reason,
        usage=accumulator.native_usage or None,
        completed=accumulator.completed,
        error=error,
        sse_events=sse_events,
    )


def _lenient_arguments(raw: str, parsed: dict[str, Any] | None) -> dict[str, Any] | None:
    if parsed is not None:
        return parsed
    arguments = parse_arguments(raw)
    return None if INVALID_ARGUMENTS in arguments else arguments


def chunkings(data: bytes) -> Iterator[tuple[str, list[bytes]]]:
    yield "whole", [data]
    yield "bytewise", [data[i : i + 1] for i in range(len(data))]


def assert_common_fields(outcome: ParseOutcome, want: dict[str, Any], label: str) -> None:
    assert outcome.text == (want["text"] or ""), label
    assert outcome.thinking == (want["thinking"] or ""), label
    assert outcome.tool_calls == [
        {"name": call["name"], "arguments": call["arguments"]} for call in want["tool_calls"]
    ], label
    assert outcome.stop_reason == want["stop_reason"], label
    assert outcome.usage == want["usage"], label


def assert_conforms(new_parser: Callable[[], WireParser], entry: dict[str, Any]) -> ParseOutcome:
    """Whole, bytewise and every split offset give the manifest's common fields.

    The parser reads only the SSE events, and parse() hands it the same events however the
    bytes were chunked, so a split whose events equal the whole body's parses as it does.
    """
    data = body(entry)
    want = expected(entry)
    whole = parse(new_parser, [data])
    for label, chunks in chunkings(data):
        assert_common_fields(parse(new_parser, chunks), want, f"{entry['file']} {label}")
    assert_every_split_decodes_alike(data, whole.sse_events, entry["file"])
    return whole


def assert_every_split_decodes_alike(
    data: bytes,
    whole: list[ServerSentEvent],
    label: str,
    new_decoder: Callable[[], SSEDecoder] = SSEDecoder,
) -> None:
    """For every offset 0 < k < len(data), a decoder fed data[:k] then data[k:] gives `whole`.

    Checked without decoding the whole body again at each offset. The decoder keeps all it
    knows between calls in its slots. It cuts each chunk's text into whole lines, handed in
    order to a loop over lines whose state also lives in its slots, and an unterminated tail
    it holds. So cutting a chunk once more at a line start changes nothing (the claim), and
    a split at k inside the line [s, e) can only change how that line is framed: its pieces
    joined, a CR LF pair or a UTF-8 sequence across k. With D(b) a decoder fed data[:b] in
    one chunk, p the start of the line before [s, e) and q the end of the line after it:
    1. at every line start b, D(b) then data[b:] and flush() give `whole` (this also tests
       the claim where it matters most: where the loop over lines is cut);
    2. at every k inside a line [s, e), a copy of D(p) fed data[p:k] then data[k:q] ends
       with the events and the slots of D(q). Its chunks hold whole lines on both sides of
       the cut line, as a split's chunks do.
    Then data[:k], data[k:] = data[:p], data[p:k], data[k:q], data[q:] (the claim), which by
    2 is D(q) fed data[q:], which by 1 gives `whole`. Every k is a line start or inside a
    line, so every split is covered, in O(len(data) x lines) rather than O(len(data) ** 2).
    """
    starts = [0, *(match.end() for match in LINE_END.finditer(data))]
    if starts[-1] != len(data):
        starts.append(len(data))  # the unterminated last line ends with the body
    decoders: list[tuple[SSEDecoder, list[ServerSentEvent]]] = []
    for start in starts:
        decoder = new_decoder()
        head = decoder.decode(data[:start])
        decoders.append((_copy(decoder), head))
        rest = decoder.decode(data[start:]) + decoder.flush()
        assert head + rest == whole, f"{label} @{start}"
    last = len(starts) - 1
    for line in range(last):
        before, after = max(line - 1, 0), min(line + 2, last)
        at_before, head = decoders[before]
        at_after, head_to_after = decoders[after]
        assert head_to_after[: len(head)] == head, f"{label} @{starts[before]}"
        want = (head_to_after[len(head) :], _slots(at_after))
        for offset in range(starts[line] + 1, starts[line + 1]):
            decoder = _copy(at_before)
            events = decoder.decode(data[starts[before] : offset])
            events += decoder.decode(data[offset : starts[after]])
            assert (events, _slots(decoder)) == want, f"{label} @{offset}"


def _copy(decoder: SSEDecoder) -> SSEDecoder:
    twin = object.__new__(type(decoder))
    for name in SSEDecoder.__slots__:
        value = getattr(decoder, name)
        if isinstance(value, list):
            value = value.copy()
        elif isinstance(value, codecs.IncrementalDecoder):
            utf8 = type(value)(value.errors)
            utf8.setstate(value.getstate())
            value = utf8
        setattr(twin, name, value)
    return twin


def _slots(decoder: SSEDecoder) -> dict[str, Any]:
    """The decoder's state, its held line as one string (its pieces depend on the chunks)."""
    state = {name: getattr(decoder, name) for name in SSEDecoder.__slots__}
    state["_partial"] = "".join(decoder._partial)
    state["_utf8"] = decoder._utf8.getstate()
    return state
