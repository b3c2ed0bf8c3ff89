"""Benchmark: resident memory of N live idle agents, each activated on a host by one turn (so
its provider and client exist), then idle: first with connection pools held (`[hosts]
idle_pools` is set to N, so no pool is closed for their number), then released.

Prints one JSON line. Run from the repository root: `python bench/idle_agents.py --n 10000`.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import time
from typing import Any

from harness import (
    MODEL,
    Pacing,
    descendants,
    grove_pids,
    rss_kb,
    running_grove,
    simulator_process,
)

CHUNK = 1000
IDLE_RELEASE_S = 45.0
WAIT_SLICE_S = 30.0
SETTLE_S = 2.0
SAMPLE = 20


def activate(grove: Any, root: str, n: int) -> list[str]:
    """`n` children of `root`, forked CHUNK at a time, each after one finished turn."""
    agents: list[str] = []
    for offset in range(0, n, CHUNK):
        prompts = [f"agent {offset + i}: say hello" for i in range(min(CHUNK, n - offset))]
        children: list[str] = grove.fork_many(root, prompts)
        pending = set(children)
        while pending:
            done = grove.wait_any(sorted(pending), WAIT_SLICE_S)
            if not done or not all(result is not None and result.ok for result in done.values()):
                raise SystemExit("idle_agents bench: a turn failed or timed out")
            pending -= set(done)
        agents.extend(children)
    return agents


def clients_held(grove: Any, agents: list[str]) -> int:
    """How many of a sample of agents hold an httpx client right now."""
    step = max(len(agents) // SAMPLE, 1)
    return sum(
        grove.provider_identity(uuid)["client"] is not None for uuid in agents[::step][:SAMPLE]
    )


def rss_mb(pids: list[int]) -> float:
    return round(sum(rss_kb(pid) for pid in pids) / 1024, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=10_000, help="idle agents")
    args = parser.parse_args()
    with (
        simulator_process(Pacing(ttft_ms=0, tps=0, tokens=8)) as simulator,
        running_grove(simulator, idle_release_s=IDLE_RELEASE_S, idle_pools=args.n) as grove,
    ):
        root = grove.create_root(MODEL).uuid
        if not grove.ask(root, "The shared context of every agent.").ok:
            raise SystemExit("idle_agents bench: the root's turn failed")
        pids = grove_pids(grove)
        gc.collect()
        empty = rss_mb(pids)
        started = time.monotonic()
        agents = activate(grove, root, args.n)
        activated_s = time.monotonic() - started
        time.sleep(SETTLE_S)
        held = rss_mb(pids)
        held_clients = clients_held(grove, agents)
        # Past the idle time plus one janitor period since the last agent's turn.
        time.sleep(IDLE_RELEASE_S * 1.25)
        released = rss_mb(pids)
        released_clients = clients_held(grove, agents)
        others = [
            pid for pid in descendants(os.getpid()) if pid not in pids and pid != simulator.pid
        ]
        report = {
            "bench": "idle_agents",
            "n": args.n,
            "activation_s": round(activated_s, 1),
            "grove_processes": len(pids),
            "rss_before_mb": empty,
            "rss_pools_held_mb": held,
            "rss_pools_released_mb": released,
            "kb_per_agent_pools_held": round((held - empty) * 1024 / args.n, 1),
            "kb_per_agent_pools_released": round((released - empty) * 1024 / args.n, 1),
            "sampled_clients_held": f"{held_clients}/{SAMPLE}",
            "sampled_clients_after_release": f"{released_clients}/{SAMPLE}",
            "ray_other_processes_rss_mb": rss_mb(others),
            "all_processes_pools_held_mb": round(held + rss_mb(others), 1),
            "target_total_mb": 3072,
        }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
