"""The recorded-stream corpus of ../shared/conformance/ and one harness to parse it.

Each wire module's conformance test feeds the corpus through SSEDecoder, its parser and the
shared TurnAccumulator, whole, byte by byte and split at every offset.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from providers.accumulate import INVALID_ARGUMENTS, TurnAccumulator, parse_arguments
from providers.errors import ProviderError
from providers.http import WireParser
from providers.sse import ServerSentEvent, SSEDecoder

REPO_ROOT = Path(__file__).resolve().parents[2]
SHARED_DIR = Path(os.environ.get("GROVE_SHARED_DIR", REPO_ROOT.parent / "shared"))
CONFORMANCE_DIR = SHARED_DIR / "conformance"
# A body this small is also parsed to the end at every split offset; larger ones are
# checked at every offset at the SSE level (the parser's only input) and fully elsewhere.
FULL_PARSE_EVERY_SPLIT_MAX_BYTES = 6_000


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


def splits(data: bytes) -> Iterator[tuple[int, list[bytes]]]:
    for offset in range(1, len(data)):
        yield offset, [data[:offset], data[offset:]]


def assert_common_fields(outcome: ParseOutcome, want: dict[str, Any], label: str) -> None:
    assert outcome.text == (want["text"] or ""), label
    assert outcome.thinking == (want["thinking"] or ""), label
    assert outcome.tool_calls == [
        {"name": call["name"], "arguments": call["arguments"]} for call in want["tool_calls"]
    ], label
    assert outcome.stop_reason == want["stop_reason"], label
    assert outcome.usage == want["usage"], label


def assert_conforms(new_parser: Callable[[], WireParser], entry: dict[str, Any]) -> ParseOutcome:
    """Whole, bytewise and every split offset give the manifest's common fields."""
    data = body(entry)
    want = expected(entry)
    whole = parse(new_parser, [data])
    for label, chunks in chunkings(data):
        assert_common_fields(parse(new_parser, chunks), want, f"{entry['file']} {label}")
    for offset, chunks in splits(data):
        if len(data) <= FULL_PARSE_EVERY_SPLIT_MAX_BYTES:
            assert_common_fields(parse(new_parser, chunks), want, f"{entry['file']} @{offset}")
        else:
            assert decode_all(chunks) == whole.sse_events, f"{entry['file']} @{offset}"
    return whole
