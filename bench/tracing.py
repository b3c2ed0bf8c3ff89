"""Benchmark: bench/fanout.py's fan-out (N forked agents each stream one turn) with tracing off
and with an OTLP exporter on, in one run, against a real OTLP/HTTP receiver in this process.

Grove sessions come in pairs, off then on, then on then off, and so on (each a Grove of its
own: tracing is set when Grove starts), each running `--rounds` fan-outs and as many bare
asyncio + httpx rounds (the same baseline as fanout.py, so a session's load shows in its
ratio), and the CPU time the driver, the supervisor and the hosts used in each fan-out. The
receiver runs in a process of its own, as a collector would: its decoding is not Grove's CPU.
Each figure's on/off ratio is taken within a pair (sessions side by side in time share the
machine's load), and the median of the pairs' ratios reported. With tracing on, every
child's `invoke_agent` and `chat` spans must arrive in the root's one trace. Prints one JSON
line. Run from the repository root: `python bench/tracing.py --n 1000`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Callable
from typing import Any

from fanout import CONTEXT, bare_httpx, check, collect, median, prompts
from harness import (
    MODEL,
    REPO_ROOT,
    Pacing,
    cpu_s,
    grove_pids,
    running_grove,
    simulator_process,
)

if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))  # the receiver is the tests' (tests/otlp.py)
from tests.otlp import ReceivedSpan, Receiver, otlp_receiver_process

SPANS_TIMEOUT_S = 120.0


def traced_children(receiver: Receiver, root: str, children: list[str]) -> dict[str, int]:
    """How many of `children` have their turn's `invoke_agent` and `chat` spans in the root's
    trace (waiting for them to arrive), and how many traces those spans span."""
    wanted = set(children)

    def spans_of_children(spans: list[ReceivedSpan]) -> dict[str, list[ReceivedSpan]]:
        found: dict[str, list[ReceivedSpan]] = {}
        for span in spans:
            agent = span.attributes.get("grove.agent.id")
            if agent in wanted and span.name in ("invoke_agent", f"chat {MODEL}"):
                found.setdefault(str(agent), []).append(span)
        return found

    def all_arrived(spans: list[ReceivedSpan]) -> bool:
        found = spans_of_children(spans)
        return len(found) == len(wanted) and all(len(kept) == 2 for kept in found.values())

    try:
        spans = receiver.wait_for(all_arrived, SPANS_TIMEOUT_S)
    except AssertionError:
        spans = receiver.spans()
    (created,) = [
        span
        for span in spans
        if span.name == "create_agent" and span.attributes.get("grove.agent.id") == root
    ]
    found = spans_of_children(spans)
    in_trace = sum(
        1
        for kept in found.values()
        if len(kept) == 2 and {span.trace_id for span in kept} == {created.trace_id}
    )
    traces = {span.trace_id for kept in found.values() for span in kept}
    return {"children_in_trace": in_trace, "traces": len(traces)}


def session(
    simulator: Any, receiver: Receiver, traced: bool, texts: list[str], rounds: int
) -> dict[str, Any]:
    """One Grove, tracing on or off: its fan-out walls, the baseline's beside them, and (on)
    how many children's spans arrived in the root's trace each round."""
    sections = {"telemetry": {"otlp_endpoint": receiver.endpoint}} if traced else {}
    walls: dict[str, list[float]] = {"grove": [], "baseline": [], "grove_cpu": []}
    checks: list[dict[str, int]] = []
    completed = 0
    with running_grove(simulator, sections=sections) as grove:
        assert grove.traced == traced
        pids = grove_pids(grove)  # this driver, the supervisor and the hosts
        for _ in range(rounds):
            root = grove.create_root(MODEL)
            if not grove.ask(root.uuid, CONTEXT).ok:
                raise SystemExit("tracing bench: the context turn failed")
            start, used = time.perf_counter(), cpu_s(pids)
            children = grove.fork_many(root.uuid, texts)
            results = collect(grove, children)
            walls["grove"].append(time.perf_counter() - start)
            if traced:
                grove.flush_telemetry()  # the spans left to export count in its CPU time
            walls["grove_cpu"].append(cpu_s(pids) - used)
            completed += check(grove, results)["ok"]
            if traced:
                checks.append(traced_children(receiver, root.uuid, children))
            wall, _ = asyncio.run(bare_httpx(simulator, texts))
            walls["baseline"].append(wall)
    return {"walls": walls, "completed": completed, "checks": checks}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=1000, help="children forked each round")
    parser.add_argument("--sessions", type=int, default=5, help="Groves per mode, in pairs")
    parser.add_argument("--rounds", type=int, default=2, help="fan-outs per session")
    parser.add_argument("--ttft-ms", type=int, default=500)
    parser.add_argument("--tps", type=float, default=50.0)
    parser.add_argument("--tokens", type=int, default=40)
    args = parser.parse_args()
    pacing = Pacing(ttft_ms=args.ttft_ms, tps=args.tps, tokens=args.tokens)
    texts = prompts(args.n)
    results: dict[str, list[dict[str, Any]]] = {"off": [], "on": []}
    with simulator_process(pacing) as simulator, otlp_receiver_process() as receiver:
        for pair in range(args.sessions):
            for mode in ("off", "on") if pair % 2 == 0 else ("on", "off"):
                one = session(simulator, receiver, mode == "on", texts, args.rounds)
                results[mode].append(one)
    print(json.dumps(report(args, pacing, results)))


def report(
    args: argparse.Namespace, pacing: Pacing, results: dict[str, list[dict[str, Any]]]
) -> dict[str, Any]:
    walls = {
        mode: {
            kind: [wall for one in sessions for wall in one["walls"][kind]]
            for kind in ("grove", "baseline", "grove_cpu")
        }
        for mode, sessions in results.items()
    }
    grove = {mode: median(walls[mode]["grove"]) for mode in walls}
    ratio = {
        mode: round(median(walls[mode]["grove"]) / median(walls[mode]["baseline"]), 3)
        for mode in walls
    }
    checks = [check for one in results["on"] for check in one["checks"]]
    paired = {
        "cpu": paired_ratios(results, lambda one: median(one["walls"]["grove_cpu"])),
        "wall_vs_baseline": paired_ratios(results, against_baseline),
    }
    return {
        "bench": "tracing",
        "n": args.n,
        "sessions": args.sessions,
        "rounds": args.rounds,
        "simulator": pacing.as_dict(),
        "off_wall_s": grove["off"],
        "on_wall_s": grove["on"],
        "on_vs_off": round(grove["on"] / grove["off"], 3),
        "off_ratio_vs_baseline": ratio["off"],
        "on_ratio_vs_baseline": ratio["on"],
        "on_vs_off_against_baseline": round(ratio["on"] / ratio["off"], 3),
        "off_cpu_s": median(walls["off"]["grove_cpu"]),
        "on_cpu_s": median(walls["on"]["grove_cpu"]),
        "cpu_on_vs_off": median(paired["cpu"]),
        "cpu_on_vs_off_pairs": paired["cpu"],
        "on_vs_off_against_baseline_pairs": paired["wall_vs_baseline"],
        "on_vs_off_against_baseline_median_pair": median(paired["wall_vs_baseline"]),
        "completed": sum(one["completed"] for ones in results.values() for one in ones),
        "turns": args.n * args.rounds * args.sessions * 2,
        "children_in_trace": [check["children_in_trace"] for check in checks],
        "traces_per_round": [check["traces"] for check in checks],
        "walls": {
            mode: {kind: [round(w, 3) for w in values] for kind, values in kinds.items()}
            for mode, kinds in walls.items()
        },
    }


def against_baseline(one: dict[str, Any]) -> float:
    """A session's fan-out wall over its baseline's (medians of its rounds)."""
    return median(one["walls"]["grove"]) / median(one["walls"]["baseline"])


def paired_ratios(
    results: dict[str, list[dict[str, Any]]], figure: Callable[[dict[str, Any]], float]
) -> list[float]:
    """`figure` of each on session over that of the off session it was paired with."""
    return [
        round(figure(on) / figure(off), 3)
        for on, off in zip(results["on"], results["off"], strict=True)
    ]


if __name__ == "__main__":
    main()
