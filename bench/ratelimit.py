"""Benchmark: 1,000 tasks through `grove batch`'s runner against `grove simulate --rpm 600`,
with the fleet's rate limit set to the same (`[providers.anthropic] rpm = 600`): how many
answers were 429 (goal: 0) and the throughput against the rate the limit allows (goal: at
least 0.9x). Beside it, on a fresh simulator each: the same batch with the limiter off, and
the official anthropic SDK with its default retries, at the same concurrency (their 429s,
time and failures).

Prints one JSON line. Run from the repository root: `python bench/ratelimit.py`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import anthropic
from harness import (
    MODEL,
    ExternalSimulator,
    Pacing,
    running_grove,
    simulator_process,
    simulator_stats,
)

from grove.supervisor.batch.records import OutputLog, record_results
from grove.supervisor.batch.summary import Totals
from grove.supervisor.batch.tasks import read_tasks

PACING = Pacing(ttft_ms=200, tps=100.0, tokens=10)
PHASES = ("grove_limited", "grove_unlimited", "anthropic_sdk")


def task_lines(n: int) -> bytes:
    return "".join(
        json.dumps({"id": i, "prompt": f"Task {i}: name one tea."}) + "\n" for i in range(n)
    ).encode()


def grove_batch(
    simulator: ExternalSimulator, n: int, concurrency: int, rpm: int | None, directory: Path
) -> dict[str, Any]:
    """The batch runner on a started Grove (Ray's start-up is not counted), with the fleet's
    rpm set to `rpm` (None: no limiter)."""
    sections = {"providers": {"anthropic": {"rpm": rpm}}} if rpm else None
    tasks = read_tasks(task_lines(n)).tasks
    output = directory / f"out-{rpm or 'off'}.jsonl"
    with running_grove(simulator, sections=sections) as grove, OutputLog(output) as log:
        root = grove.create_root(MODEL).uuid
        start = time.perf_counter()
        steps = grove.run_batch(root, tasks, concurrency=concurrency)
        for _ in record_results(steps, log, Totals(total=n)):
            pass
        seconds = time.perf_counter() - start
    records = [json.loads(line) for line in output.read_text().splitlines() if line.strip()]
    ok = sum(record["status"] == "ok" for record in records)
    return {"s": round(seconds, 2), "ok": ok, "failed": n - ok}


async def sdk_batch(simulator: ExternalSimulator, n: int, concurrency: int) -> dict[str, Any]:
    """The official SDK, its default retries, `concurrency` requests at a time."""
    client = anthropic.AsyncAnthropic(base_url=simulator.base_url, api_key=simulator.api_key)
    gate = asyncio.Semaphore(concurrency)
    failed = 0

    async def one(index: int) -> None:
        nonlocal failed
        async with gate:
            try:
                await client.messages.create(
                    model=MODEL,
                    max_tokens=64,
                    messages=[{"role": "user", "content": f"Task {index}: name one tea."}],
                )
            except anthropic.APIError:
                failed += 1

    start = time.perf_counter()
    await asyncio.gather(*(one(index) for index in range(n)))
    seconds = time.perf_counter() - start
    await client.close()
    return {"s": round(seconds, 2), "ok": n - failed, "failed": failed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=1000, help="tasks")
    parser.add_argument("--rpm", type=int, default=600, help="the simulator's limit")
    parser.add_argument("--concurrency", type=int, default=200)
    args = parser.parse_args()
    # A full bucket lets `rpm` requests go at once; the rest go at rpm/60 a second.
    allowed_s = max(args.n - args.rpm, 0) / (args.rpm / 60) + PACING.seconds
    report: dict[str, Any] = {
        "bench": "ratelimit",
        "n": args.n,
        "rpm": args.rpm,
        "concurrency": args.concurrency,
        "allowed_s": round(allowed_s, 2),
    }
    with tempfile.TemporaryDirectory(prefix="grove-bench-ratelimit-") as name:
        directory = Path(name)
        for phase in PHASES:
            with simulator_process(PACING, rpm=args.rpm) as simulator:  # a full bucket each
                if phase == "anthropic_sdk":
                    figures = asyncio.run(sdk_batch(simulator, args.n, args.concurrency))
                else:
                    rpm = args.rpm if phase == "grove_limited" else None
                    figures = grove_batch(simulator, args.n, args.concurrency, rpm, directory)
                figures["responses_429"] = simulator_stats(simulator)["rate_limited"]
            report[phase] = figures
    limited = report["grove_limited"]
    report["grove_limited"]["of_allowed_rate"] = round(allowed_s / limited["s"], 3)
    for peer in ("grove_unlimited", "anthropic_sdk"):
        report[f"{peer}_time_ratio"] = round(limited["s"] / report[peer]["s"], 3)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
