"""Benchmark: latency of one fork through the supervisor (`/fork` from the Python API, the
child record stored before the call returns), on a SQLite file and on a private redis-server.

Also forks from a parent holding 200 messages (`sqlite_long_parent`): a fork reads no
conversation, so its cost must not grow with the parent's history. Beside each store's fork,
the round trip of a budget's hold (`*_budget_hold`: what a budgeted request asks the supervisor
before it starts, from this process, as one host's lone request would) and of its settling.
Prints one JSON line.
Run from the repository root: `python bench/fork_latency.py --n 2000`.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from harness import MODEL, Pacing, percentile, redis_server, running_grove, simulator_process

WARMUP = 50
# The long parent: 200 messages of 2 KB, as after a long working session.
LONG_PARENT_MESSAGES = 200
LONG_MESSAGE_CHARS = 2000


def fork_latencies(grove: Any, n: int, history: int = 0) -> list[float]:
    """Milliseconds of each of `n` sequential `/fork` commands on one root holding `history`
    messages (after a warm-up)."""
    root = grove.create_root(MODEL)
    kinds = ("user", "assistant")
    grove.seed(root.uuid, [(kinds[i % 2], "x" * LONG_MESSAGE_CHARS) for i in range(history)])
    samples: list[float] = []
    for index in range(WARMUP + n):
        start = time.perf_counter()
        outcome = grove.dispatch(root.uuid, "/fork")
        elapsed = (time.perf_counter() - start) * 1000
        if not outcome.ok:
            raise SystemExit(f"fork_latency bench: /fork failed: {outcome.text}")
        if index >= WARMUP:
            samples.append(elapsed)
    children = grove.dispatch(root.uuid, "/agents").text.count(" child ")
    if children != WARMUP + n:
        raise SystemExit(f"fork_latency bench: {children} children stored, not {WARMUP + n}")
    return samples


def call_floor(grove: Any, n: int) -> list[float]:
    """Milliseconds of the cheapest supervisor call (a dict lookup): the Ray round trip."""
    root = grove.create_root(MODEL)
    samples: list[float] = []
    for index in range(WARMUP + n):
        start = time.perf_counter()
        grove.streaming(root.uuid)
        if index >= WARMUP:
            samples.append((time.perf_counter() - start) * 1000)
    return samples


def budget_round_trips(grove: Any, n: int) -> tuple[list[float], list[float]]:
    """Milliseconds of each of `n` holds of a budgeted root's request, and of each settling."""
    import ray

    from grove.supervisor import Budget

    root = grove.create_root(MODEL, budget=Budget(tokens=10**12)).uuid
    holds: list[float] = []
    settles: list[float] = []
    for index in range(WARMUP + n):
        start = time.perf_counter()
        ((answer, hold),) = ray.get(
            grove.supervisor.budget_reserve_many.remote([(root, MODEL, 100, None, "standard")])
        )
        held = time.perf_counter()
        ray.get(grove.supervisor.budget_settle_many.remote([(root, hold, 150, 0.0)]))
        settled = time.perf_counter()
        if answer != "held":
            raise SystemExit(f"fork_latency bench: the budget hold was {answer}: {hold}")
        if index >= WARMUP:
            holds.append((held - start) * 1000)
            settles.append((settled - held) * 1000)
    return holds, settles


def summary(samples: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(percentile(samples, 0.50), 3),
        "p90_ms": round(percentile(samples, 0.90), 3),
        "p99_ms": round(percentile(samples, 0.99), 3),
        "max_ms": round(max(samples), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=2000, help="forks measured per store")
    args = parser.parse_args()
    report: dict[str, Any] = {"bench": "fork_latency", "n": args.n, "call": "dispatch('/fork')"}
    with simulator_process(Pacing(ttft_ms=0, tps=0, tokens=8)) as simulator:
        with running_grove(simulator) as grove:
            report["sqlite"] = summary(fork_latencies(grove, args.n))
            report["sqlite_long_parent"] = summary(
                fork_latencies(grove, args.n, history=LONG_PARENT_MESSAGES)
            )
            report["ray_call_floor"] = summary(call_floor(grove, args.n))
            holds, settles = budget_round_trips(grove, args.n)
            report["sqlite_budget_hold"] = summary(holds)
            report["sqlite_budget_settle"] = summary(settles)
        with redis_server() as url, running_grove(simulator, store_url=url) as grove:
            report["redis"] = summary(fork_latencies(grove, args.n))
            holds, settles = budget_round_trips(grove, args.n)
            report["redis_budget_hold"] = summary(holds)
            report["redis_budget_settle"] = summary(settles)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
