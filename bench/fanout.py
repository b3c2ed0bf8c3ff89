"""Benchmark: N forked agents each stream one turn through Grove, against the same N streams
fetched by one bare asyncio + httpx loop, both from one simulator in a process of its own.

Prints one JSON line. Run from the repository root: `python bench/fanout.py --n 1000`;
`--isolation process` gives every agent a host process of its own (use a small N);
`--with-tools` also forks, in each round, from a root holding the default tool set and two
Python tools (offered in every request, never called), against the same without (goal: 1.05x);
`--no-compaction` turns automatic compaction off, to compare its cost on turns that never
compact (goal: the ratio with it within 1.05x of the ratio without); `--no-cache` turns
provider caching off (`[cache] enabled = false`), to compare what its marks and warm-up cost
a fan-out (goal: the ratio with it within 1.05x of the ratio without); `--fleet-control` sets a
budget and provider rate limits that never bind (goal: the ratio with them within 1.05x of
the ratio without). `cpu_ratio`: the CPU time Grove's driver, supervisor and hosts use for
a round over the baseline's process for its run (medians), which a busy machine stretches
far less than the walls. `cpu_by_process`: that time by process (medians of the rounds), and
the simulator's during Grove's rounds beside its time during the baseline's runs
(`baseline_simulator_cpu_s`): the baseline is one process, as long as its own CPU time on one
core, while Grove's processes share both cores with the simulator, so what the simulator
costs counts in Grove's wall and hardly in the baseline's. Before each timed round and run the
collector's pending work is done, untimed (`gc.collect()`), so that none pays a full
collection of the garbage of what ran before it in this process.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import ssl
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import certifi
import httpx
import uvloop
from harness import (
    MODEL,
    ExternalSimulator,
    Pacing,
    PeakRSS,
    cpu_s,
    grove_pids,
    running_grove,
    simulator_process,
)

CONTEXT = (
    "You are reviewing a small Python service. It reads orders from a queue, prices them with "
    "a rules table and writes invoices to Postgres. Answer in two sentences."
)
CONTEXT_REPLY = "Understood: a queue consumer that prices orders and stores invoices."
WAIT_SLICE_S = 5.0
# Fleet control configured but never binding: every request is held, settled and admitted.
FLEET_CONTROL = {
    "budget": {"tokens": 10**12},
    "providers": {"anthropic": {"rpm": 10**7, "tpm": 10**10, "max_concurrency": 100_000}},
}
TURN_TIMEOUT_S = 600.0
SOLO_STARTS_IN_FLIGHT = 8


async def lookup(key: str) -> str:
    """Look a key up in the inventory."""
    return f"{key}: 3 in stock"


def price(sku: str, quantity: int = 1) -> float:
    """The price of `quantity` units of `sku` in euros."""
    return 9.5 * quantity


TOOLS: list[Any] = ["todo", "fork", "send", "wait", lookup, price]


def prompts(n: int) -> list[str]:
    return [f"Task {i}: name one risk in how the service prices order {i}." for i in range(n)]


async def bare_httpx(simulator: ExternalSimulator, texts: list[str]) -> tuple[float, int]:
    """The baseline: one process, one event loop, one client per stream on one TLS context.
    Its wall time and the SSE events it read."""
    context = ssl.create_default_context(cafile=certifi.where())
    url = simulator.base_url.rstrip("/") + "/v1/messages"
    headers = {
        "x-api-key": simulator.api_key,
        "anthropic-version": "2023-06-01",
        "content-type": "application/json",
    }

    async def one(text: str) -> int:
        body = {
            "model": MODEL,
            "max_tokens": 1024,
            "stream": True,
            "messages": [
                {"role": "user", "content": CONTEXT},
                {"role": "assistant", "content": CONTEXT_REPLY},
                {"role": "user", "content": text},
            ],
        }
        async with (
            httpx.AsyncClient(verify=context, timeout=TURN_TIMEOUT_S) as client,
            client.stream("POST", url, headers=headers, json=body) as response,
        ):
            response.raise_for_status()
            data = await response.aread()
        return data.count(b"\n\n")

    start = time.perf_counter()
    events = await asyncio.gather(*(one(text) for text in texts))
    return time.perf_counter() - start, sum(events)


@dataclass(frozen=True, slots=True)
class Processes:
    """Grove's processes (this driver, the supervisor, the shared hosts) and the simulator's,
    whose CPU time a round reads apart."""

    driver: int
    supervisor: int
    hosts: tuple[int, ...]
    simulator: int

    @classmethod
    def of(cls, grove: Any, simulator: ExternalSimulator) -> Processes:
        driver, supervisor, *hosts = grove_pids(grove)
        return cls(driver, supervisor, tuple(hosts), simulator.pid)

    @property
    def grove(self) -> list[int]:
        return [self.driver, self.supervisor, *self.hosts]

    def cpu(self) -> dict[str, float]:
        """CPU seconds each has used so far (the hosts together)."""
        return {
            "driver": cpu_s([self.driver]),
            "supervisor": cpu_s([self.supervisor]),
            "hosts": cpu_s(self.hosts),
            "simulator": cpu_s([self.simulator]),
        }

    def cpu_since(self, before: dict[str, float]) -> dict[str, float]:
        return {name: now - before[name] for name, now in self.cpu().items()}


def forked_round(
    grove: Any, root: str, texts: list[str], processes: Processes | None = None
) -> dict[str, Any]:
    """`fork_many` children of `root`, fan-in with `wait_any`, every turn checked in the store
    (after the wall and the CPU time of `processes` are taken)."""
    gc.collect()
    used = processes.cpu() if processes else {}
    start = time.perf_counter()
    children = grove.fork_many(root, texts)
    forked = time.perf_counter() - start
    results = collect(grove, children)
    wall = time.perf_counter() - start
    spent = processes.cpu_since(used) if processes else {}
    return {
        "wall_s": wall,
        "fork_many_s": forked,
        "cpu_s": sum(seconds for name, seconds in spent.items() if name != "simulator"),
        "cpu_by_process": spent,
        **check(grove, results),
    }


def solo_round(grove: Any, texts: list[str], rss: PeakRSS) -> dict[str, Any]:
    """One root per agent, each with `isolation="process"`: a host process per agent (its
    start is part of the time), each told the context and its task in one turn."""
    roots = [grove.create_root(MODEL, isolation="process").uuid for _ in texts]
    gc.collect()
    used = cpu_s(rss.pids)
    start = time.perf_counter()
    with ThreadPoolExecutor(SOLO_STARTS_IN_FLIGHT) as pool:
        list(pool.map(lambda pair: grove.send(*pair), zip(roots, texts, strict=True)))
    results = collect(grove, roots)
    wall = time.perf_counter() - start
    shared = len(rss.pids)
    rss.pids.extend(pid for pid in grove_pids(grove, roots) if pid not in rss.pids)
    spent = cpu_s(rss.pids[:shared]) - used + cpu_s(rss.pids[shared:])  # the new ones' whole
    return {"wall_s": wall, "cpu_s": spent, **check(grove, results)}


def collect(grove: Any, agents: list[str]) -> dict[str, Any]:
    """Every agent's turn result, taken with `wait_any` as they finish."""
    pending = set(agents)
    results: dict[str, Any] = {}
    deadline = time.monotonic() + TURN_TIMEOUT_S
    while pending:
        if time.monotonic() > deadline:
            raise SystemExit(f"fanout bench: {len(pending)} turns still running after the deadline")
        done = grove.wait_any(list(pending), WAIT_SLICE_S)
        for uuid, result in done.items():
            results[uuid] = result
            pending.discard(uuid)
    return results


def check(grove: Any, results: dict[str, Any]) -> dict[str, Any]:
    """How many turns completed, and whether each one's answer is in the store."""
    ok = [uuid for uuid, result in results.items() if result is not None and result.ok]
    stored = sum(
        1
        for uuid in ok
        if any(m.kind == "assistant" and m.content for m in grove.history(uuid)[-1:])
    )
    return {"ok": len(ok), "stored": stored}


def median(values: list[float]) -> float:
    return round(statistics.median(values), 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=1000, help="agents (and baseline streams)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating runs; medians count")
    parser.add_argument("--isolation", choices=("shared", "process"), default="shared")
    parser.add_argument(
        "--with-tools", action="store_true", help="also fork from a root holding tools"
    )
    parser.add_argument(
        "--no-compaction",
        action="store_true",
        help="[compaction] enabled = false (to compare: compaction must not slow turns)",
    )
    parser.add_argument(
        "--no-cache",
        action="store_true",
        help="[cache] enabled = false (to compare: caching must not slow a fan-out)",
    )
    parser.add_argument(
        "--fleet-control",
        action="store_true",
        help="a [budget] and [providers.anthropic] rate limits far above what the run uses "
        "(to compare: configured but not binding, they must not slow turns)",
    )
    Pacing.add_arguments(parser)
    args = parser.parse_args()
    pacing = Pacing.of(args)
    texts = prompts(args.n)
    solo = args.isolation == "process"
    walls: dict[str, list[float]] = {"grove": [], "baseline": [], "baseline_uvloop": []}
    # CPU time (stretched far less than the walls by what else runs on the machine): Grove's
    # driver, supervisor and hosts over a round, the baseline's process over its run.
    cpu: dict[str, list[float]] = {"grove": [], "baseline": [], "baseline_simulator": []}
    by_process: dict[str, list[float]] = {}  # Grove's rounds: each process's CPU time
    forks: list[float] = []
    completed = stored = events = 0
    sections: dict[str, Any] = {"compaction": {"enabled": False}} if args.no_compaction else {}
    if args.no_cache:
        sections["cache"] = {"enabled": False}
    if args.fleet_control:
        sections |= FLEET_CONTROL
    with (
        simulator_process(pacing) as simulator,
        running_grove(simulator, sections=sections) as grove,
    ):
        root = grove.create_root(MODEL)
        tooled = grove.create_root(MODEL, tools=TOOLS) if args.with_tools else None
        for context_root in (root, tooled):
            if context_root and not solo and not grove.ask(context_root.uuid, CONTEXT).ok:
                raise SystemExit("fanout bench: the context turn failed")
        watched = Processes.of(grove, simulator)
        pids = watched.grove
        peak_mb, processes = 0.0, 0
        for round_number in range(args.rounds):
            # Grove first: the RSS of round 1 is read before any baseline ran in this process.
            with PeakRSS(pids) as rss:
                if solo:
                    figures = solo_round(grove, [f"{CONTEXT}\n\n{t}" for t in texts], rss)
                else:
                    figures = forked_round(grove, root.uuid, texts, watched)
                    forks.append(figures["fork_many_s"])
            if round_number == 0:
                peak_mb, processes = rss.peak_mb, len(rss.pids)
            walls["grove"].append(figures["wall_s"])
            cpu["grove"].append(figures["cpu_s"])
            for name, seconds in figures.get("cpu_by_process", {}).items():
                by_process.setdefault(name, []).append(seconds)
            completed += figures["ok"]
            stored += figures["stored"]
            if tooled is not None:
                with_tools = forked_round(grove, tooled.uuid, texts, watched)
                walls.setdefault("grove_with_tools", []).append(with_tools["wall_s"])
                completed += with_tools["ok"]
                stored += with_tools["stored"]
            for loop in ("baseline", "baseline_uvloop"):
                runner = uvloop.run if loop == "baseline_uvloop" else asyncio.run
                gc.collect()
                used, simulator_used = cpu_s([os.getpid()]), cpu_s([simulator.pid])
                wall, events = runner(bare_httpx(simulator, texts))
                walls[loop].append(wall)
                if loop == "baseline":
                    cpu["baseline"].append(cpu_s([os.getpid()]) - used)
                    cpu["baseline_simulator"].append(cpu_s([simulator.pid]) - simulator_used)
    grove_s, baseline_s = median(walls["grove"]), median(walls["baseline"])
    report: dict[str, Any] = {
        "bench": "fanout",
        "n": args.n,
        "isolation": args.isolation,
        "compaction": not args.no_compaction,
        "cache": not args.no_cache,
        "fleet_control": args.fleet_control,
        "rounds": args.rounds,
        "simulator": pacing.as_dict(),
        "ideal_s": round(pacing.seconds, 3),
        "grove_wall_s": grove_s,
        "baseline_wall_s": baseline_s,
        "ratio": round(grove_s / baseline_s, 3),
        "baseline_uvloop_wall_s": median(walls["baseline_uvloop"]),
        "ratio_vs_uvloop": round(grove_s / median(walls["baseline_uvloop"]), 3),
        "grove_cpu_s": median(cpu["grove"]),
        "baseline_cpu_s": median(cpu["baseline"]),
        "cpu_ratio": round(median(cpu["grove"]) / median(cpu["baseline"]), 3),
        "cpu_by_process": {name: median(seconds) for name, seconds in by_process.items()},
        "baseline_simulator_cpu_s": median(cpu["baseline_simulator"]),
        "grove_events_per_s": round(events / grove_s),
        "baseline_events_per_s": round(events / baseline_s),
        "events_per_round": events,
        "grove_peak_rss_mb": peak_mb,
        "grove_processes": processes,
        "turns": args.n * args.rounds * (2 if tooled else 1),
        "completed": completed,
        "stored": stored,
        "walls": {name: [round(w, 3) for w in values] for name, values in walls.items()},
    }
    if forks:
        report["fork_many_s"] = median(forks)
    if tooled is not None:
        report["grove_with_tools_wall_s"] = median(walls["grove_with_tools"])
        report["tools_ratio"] = round(median(walls["grove_with_tools"]) / grove_s, 3)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
