"""Benchmark: mail messages per second routed between agents through the supervisor, each
stored before the call returns and steered into its recipient on a host.

Two paths: `/send` commands (one message per command, many in flight) and `Grove.route_mail`
(a batch per call, stored in one transaction). Prints one JSON line. Run from the repository
root: `python bench/routing.py --n 100000`.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from typing import Any

import ray
from harness import MODEL, Pacing, running_grove, simulator_process

AGENTS = 100
SEND_IN_FLIGHT = 64
SEND_MESSAGES = 2000
WAIT_SLICE_S = 30.0


def held_agents(grove: Any) -> tuple[str, list[str]]:
    """A root and AGENTS forked children, each after one turn (held on a host, provider built)."""
    root = grove.create_root(MODEL).uuid
    children: list[str] = grove.fork_many(root, [f"agent {i}, say hello" for i in range(AGENTS)])
    pending = set(children)
    while pending:
        done = grove.wait_any(sorted(pending), WAIT_SLICE_S)
        if not done or not all(result is not None and result.ok for result in done.values()):
            raise SystemExit("routing bench: a child's first turn failed")
        pending -= set(done)
    return root, children


def per_command(grove: Any, root: str, agents: list[str], count: int) -> float:
    """Messages per second through `/send`, with SEND_IN_FLIGHT commands in flight."""
    lines = [f'/send {agents[i % len(agents)]} "note {i}"' for i in range(count)]
    in_flight: list[Any] = []
    start = time.perf_counter()
    for line in lines:
        if len(in_flight) >= SEND_IN_FLIGHT:
            ready, in_flight = ray.wait(in_flight, num_returns=1, timeout=60)
            check_sent(ray.get(ready))
        in_flight.append(grove.supervisor.dispatch.remote(root, line, "api"))
    check_sent(ray.get(in_flight, timeout=60))
    return count / (time.perf_counter() - start)


def check_sent(outcomes: list[Any]) -> None:
    for outcome in outcomes:
        if not outcome.ok:
            raise SystemExit(f"routing bench: /send failed: {outcome.text}")


def batched(grove: Any, agents: list[str], count: int, batch: int) -> tuple[float, int]:
    """Messages per second through `route_mail` in batches of `batch`; and how many stored."""
    picks = random.Random(7)
    mails = [
        (picks.choice(agents), picks.choice(agents), f"note {i}: the price table changed")
        for i in range(count)
    ]
    stored = 0
    start = time.perf_counter()
    for offset in range(0, count, batch):
        stored += len(grove.route_mail(mails[offset : offset + batch]))
    return count / (time.perf_counter() - start), stored


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=100_000, help="messages through route_mail")
    parser.add_argument("--batch", type=int, default=1000, help="messages per route_mail call")
    args = parser.parse_args()
    with (
        simulator_process(Pacing(ttft_ms=0, tps=0, tokens=8)) as simulator,
        running_grove(simulator) as grove,
    ):
        root, agents = held_agents(grove)
        command_rate = per_command(grove, root, agents, SEND_MESSAGES)
        batch_rate, stored = batched(grove, agents, args.n, args.batch)
    report = {
        "bench": "routing",
        "n": args.n,
        "agents": AGENTS,
        "batch": args.batch,
        "route_mail_msgs_per_s": round(batch_rate),
        "stored": stored,
        "send_command_msgs_per_s": round(command_rate),
        "send_commands": SEND_MESSAGES,
        "send_in_flight": SEND_IN_FLIGHT,
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
