"""Benchmark: Grove's SSEDecoder against httpx-sse on the same bytes, bytes -> events.

Prints one JSON line. Run from the repository root: `python bench/sse.py --n 7`.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

from httpx._decoders import TextDecoder
from httpx_sse._decoders import SSEDecoder as HttpxSSEDecoder
from httpx_sse._decoders import SSELineDecoder

from grove.providers.sse import SSEDecoder

REPO_ROOT = Path(__file__).resolve().parents[1]
CORPUS_MIN_BYTES = 4_000_000
CORPUS_CHUNK_BYTES = 16_384  # a bulk read; the token stream below arrives an event at a time
TOKEN_EVENTS = 40_000
MEGABYTE = 1_000_000

Decoder = Callable[[list[bytes]], list[str]]


def grove_events(chunks: list[bytes]) -> list[str]:
    decoder = SSEDecoder()
    data = [event.data for chunk in chunks for event in decoder.decode(chunk)]
    return data + [event.data for event in decoder.flush()]


def httpx_sse_events(chunks: list[bytes]) -> list[str]:
    """The path of httpx-sse's `EventSource.iter_sse`: httpx's incremental text decoder,
    then httpx-sse's SSELineDecoder and SSEDecoder, minus the network."""
    text_decoder = TextDecoder(encoding="utf-8")
    line_decoder = SSELineDecoder()
    decoder = HttpxSSEDecoder()
    data: list[str] = []
    for chunk in chunks:
        for line in line_decoder.decode(text_decoder.decode(chunk)):
            event = decoder.decode(line.rstrip("\n"))
            if event is not None:
                data.append(event.data)
    for line in line_decoder.decode(text_decoder.flush()) + line_decoder.flush():
        event = decoder.decode(line.rstrip("\n"))
        if event is not None:
            data.append(event.data)
    return data


def corpus_chunks() -> list[bytes]:
    """Every conformance body, each closed by a blank line, repeated to a few megabytes."""
    if str(REPO_ROOT) not in sys.path:
        sys.path.insert(0, str(REPO_ROOT))
    from tests.conformance import corpus

    bodies = [corpus.body(entry) for entry in corpus.manifest()["entries"]]
    one_pass = b"".join(body.rstrip(b"\r\n") + b"\n\n" for body in bodies)
    data = one_pass * -(-CORPUS_MIN_BYTES // len(one_pass))
    return [data[i : i + CORPUS_CHUNK_BYTES] for i in range(0, len(data), CORPUS_CHUNK_BYTES)]


def token_chunks() -> list[bytes]:
    """An Anthropic-shaped text stream of small deltas, one event per chunk as it is sent."""
    words = ("The", " quick", " brown", " fox", " jumps", " over", " the", " lazy", " dog", ".")
    return [
        b"event: content_block_delta\n"
        + b'data: {"type":"content_block_delta","index":0,'
        + json.dumps({"type": "text_delta", "text": words[i % len(words)]}).encode()
        + b"}\n\n"
        for i in range(TOKEN_EVENTS)
    ]


def best_seconds(decoders: dict[str, Decoder], chunks: list[bytes], n: int) -> dict[str, float]:
    """Best of `n` runs of each decoder, the runs interleaved so that drift hits both."""
    best = dict.fromkeys(decoders, float("inf"))
    for _ in range(n):
        for name, decode in decoders.items():
            gc.collect()
            start = time.perf_counter()
            decode(chunks)
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def rates(size: int, seconds: dict[str, float]) -> dict[str, object]:
    """MB/s (10^6 bytes) of each decoder, and how many times faster Grove's is."""
    return {
        "grove_mb_s": round(size / seconds["grove"] / MEGABYTE, 1),
        "httpx_sse_mb_s": round(size / seconds["httpx_sse"] / MEGABYTE, 1),
        "ratio": round(seconds["httpx_sse"] / seconds["grove"], 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=5, help="repetitions; the best run counts")
    args = parser.parse_args()
    decoders: dict[str, Decoder] = {"grove": grove_events, "httpx_sse": httpx_sse_events}
    workloads = {"corpus": corpus_chunks(), "tokens": token_chunks()}
    details: dict[str, dict[str, object]] = {}
    total_bytes = total_events = 0
    total_seconds = dict.fromkeys(decoders, 0.0)
    for workload, chunks in workloads.items():
        events = grove_events(chunks)
        if events != httpx_sse_events(chunks):
            raise SystemExit(f"sse bench: the decoders disagree on the {workload} workload")
        size = sum(len(chunk) for chunk in chunks)
        best = best_seconds(decoders, chunks, args.n)
        details[workload] = {"bytes": size, "chunks": len(chunks), "events": len(events)}
        details[workload].update(rates(size, best))
        total_bytes += size
        total_events += len(events)
        for name, seconds in best.items():
            total_seconds[name] += seconds
    report: dict[str, object] = {
        "bench": "sse",
        "n": args.n,
        "bytes": total_bytes,
        "events": total_events,
    }
    report.update(rates(total_bytes, total_seconds))
    report["workloads"] = details
    print(json.dumps(report))


if __name__ == "__main__":
    main()
