"""Benchmark: N agents each make 3 round trips to a small async tool and then answer, through
Grove and through pydantic-ai agents, against one simulator in a process of its own; then N
agents on 2 hosts each call 3 configured stdio MCP servers once.

Grove's round runs in `--sessions` Groves with durable steps off (`[hosts] durable_steps`:
a turn stored only when it ends) and as many with them on, in turn: what storing each step
as it ends costs tool turns is the median of the pairs' ratios, of the wall time and of the
CPU time (goal: 1.10x); `--durable-only` stops there.

Prints one JSON line: both wall times and their ratio (goal: Grove <= 0.5x pydantic-ai), the
tool calls made, the p50 of Grove's time inside a call against calling the function, and for
MCP the server processes that ran (goal: at most 2 hosts x 3 servers = 6, where a server per
agent would be 3 N), their memory, and MCP calls per second.
Run from the repository root: `python bench/tools.py --n 1000` (needs the bench extras).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

from harness import (
    MODEL,
    ExternalSimulator,
    Pacing,
    cpu_s,
    grove_pids,
    pydantic_ai_model,
    rss_kb,
    running_grove,
    simulator_process,
)

ROUND_TRIPS = 3
MCP_SERVER = Path(__file__).resolve().with_name("mcp_inventory.py")
MCP_SERVERS = ("stock", "prices", "depots")
MCP_HOSTS = 2
TURN_TIMEOUT_S = 900.0
WAIT_SLICE_S = 5.0


async def lookup(key: str) -> str:
    """Look a key up in the inventory."""
    await asyncio.sleep(0)
    return f"{key}: 3 in stock"


def prompt(index: int) -> str:
    """A task whose reply calls `lookup` at steps 1..ROUND_TRIPS, then answers."""
    calls = " ".join(
        f"[[sim tool=lookup args='{json.dumps({'key': f'item-{index}-{step}'})}' step={step}]]"
        for step in range(1, ROUND_TRIPS + 1)
    )
    return f"{calls} Task {index}: check the stock of three items."


def mcp_prompt(index: int) -> str:
    """A task whose reply calls each MCP server's `lookup` once, one server a step."""
    calls = " ".join(
        f"[[sim tool=mcp__{server}__lookup args='{json.dumps({'key': f'item-{index}'})}' "
        f"step={step}]]"
        for step, server in enumerate(MCP_SERVERS, start=1)
    )
    return f"{calls} Task {index}: check the stock, price and depot of one item."


def grove_round(grove: Any, root: str, prompts: list[str]) -> dict[str, Any]:
    start = time.perf_counter()
    children = grove.fork_many(root, prompts)
    pending, ok = set(children), 0
    deadline = time.monotonic() + TURN_TIMEOUT_S
    while pending:
        if time.monotonic() > deadline:
            raise SystemExit(f"tools bench: {len(pending)} Grove turns still running")
        for uuid, result in grove.wait_any(list(pending), WAIT_SLICE_S).items():
            pending.discard(uuid)
            ok += bool(result is not None and result.ok)
    wall = time.perf_counter() - start
    calls = sum(
        1
        for uuid in children[:50]
        for message in grove.history(uuid)
        if message.kind == "tool_result"
        for part in message.data["parts"]
        if not part["is_error"]
    )
    return {"wall_s": wall, "ok": ok, "tool_results_in_first_50": calls}


def mcp_server_pids() -> list[int]:
    """The live processes running bench/mcp_inventory.py."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                command = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if str(MCP_SERVER).encode() in command:
                found.append(int(entry.name))
    return found


class ServerCensus:
    """Samples the MCP server processes in a thread: every pid seen, and the peak of their
    summed RSS."""

    def __init__(self, interval_s: float = 0.2) -> None:
        self.seen: set[int] = set()
        self.peak_kb = 0
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            pids = mcp_server_pids()
            self.seen.update(pids)
            self.peak_kb = max(self.peak_kb, sum(rss_kb(pid) for pid in pids))
            self._stop.wait(self._interval_s)

    def __enter__(self) -> ServerCensus:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def mcp_round(simulator: ExternalSimulator, n: int) -> dict[str, Any]:
    """N agents on MCP_HOSTS hosts, each calling every configured server once."""
    servers = {name: {"command": sys.executable, "args": [str(MCP_SERVER)]} for name in MCP_SERVERS}
    sections = {"mcp": {"servers": servers}}
    with running_grove(simulator, hosts=MCP_HOSTS, sections=sections) as grove:
        root = grove.create_root(MODEL, tools=[f"mcp__{name}" for name in MCP_SERVERS]).uuid
        with ServerCensus() as census:
            round_figures = grove_round(grove, root, [mcp_prompt(i) for i in range(n)])
    calls = round_figures["ok"] * len(MCP_SERVERS)
    return {
        **round_figures,
        "server_processes": len(census.seen),
        "server_rss_mb": round(census.peak_kb / 1024, 1),
        "calls_per_s": round(calls / round_figures["wall_s"], 1),
    }


def call_durations_ms(grove: Any) -> list[float]:
    """Grove's time inside each call (validation, the call, the result), from the events."""
    from grove.supervisor.store import open_store

    store = open_store(grove.settings.store)
    try:
        durations, after = [], 0
        while batch := store.events(after_id=after, limit=10_000):
            after = batch[-1].id
            durations += [
                float(e.payload["duration_ms"]) for e in batch if e.kind == "ToolResulted"
            ]
        return durations
    finally:
        store.close()


async def pydantic_ai_round(simulator: ExternalSimulator, n: int) -> dict[str, Any]:
    from pydantic_ai import Agent

    model = pydantic_ai_model(simulator, n, TURN_TIMEOUT_S)
    agent = Agent(model, tools=[lookup])
    start = time.perf_counter()
    results = await asyncio.gather(
        *(agent.run(prompt(i)) for i in range(n)), return_exceptions=True
    )
    wall = time.perf_counter() - start
    ok = [r for r in results if not isinstance(r, BaseException)]
    calls = sum(
        1
        for result in ok[:50]
        for message in result.all_messages()
        for part in message.parts
        if part.part_kind == "tool-return"
    )
    errors = sorted({type(r).__name__ for r in results if isinstance(r, BaseException)})
    return {"wall_s": wall, "ok": len(ok), "tool_results_in_first_50": calls, "errors": errors}


def direct_call_ms(samples: int = 2000) -> float:
    """The p50 of awaiting the tool function itself."""

    async def measure() -> list[float]:
        times = []
        for i in range(samples):
            start = time.perf_counter()
            await lookup(f"k{i}")
            times.append((time.perf_counter() - start) * 1000)
        return times

    return statistics.median(asyncio.run(measure()))


def durable_session(
    simulator: ExternalSimulator, n: int, hosts: int | None, durable: bool
) -> dict[str, Any]:
    """One Grove, each finished step of a turn stored as it ends or not (`[hosts]
    durable_steps`): the tool round's figures, the CPU time this driver, the supervisor and
    the hosts used in it, its calls' durations, its processes."""
    sections = {"hosts": {"durable_steps": durable}}
    with running_grove(simulator, hosts=hosts, sections=sections) as grove:
        root = grove.create_root(MODEL, tools=[lookup]).uuid
        pids = grove_pids(grove)
        used = cpu_s(pids)
        ours = grove_round(grove, root, [prompt(i) for i in range(n)])
        cpu = cpu_s(pids) - used
        return {**ours, "cpu_s": cpu, "durations": call_durations_ms(grove), "processes": pids}


def durable_figures(sessions: dict[bool, list[dict[str, Any]]]) -> dict[str, Any]:
    """Durable steps against none: the medians of the alternating sessions' ratios, of the
    wall time and of the CPU time (which a shared machine's load does not stretch)."""

    def ratio(figure: str) -> float:
        pairs = zip(sessions[True], sessions[False], strict=True)
        ratios = [float(on[figure]) / float(off[figure]) for on, off in pairs]
        return round(statistics.median(ratios), 3)

    return {
        "durable_wall_s": [round(one["wall_s"], 3) for one in sessions[True]],
        "steps_off_wall_s": [round(one["wall_s"], 3) for one in sessions[False]],
        "durable_vs_steps_off": ratio("wall_s"),
        "durable_cpu_s": [round(one["cpu_s"], 2) for one in sessions[True]],
        "steps_off_cpu_s": [round(one["cpu_s"], 2) for one in sessions[False]],
        "durable_cpu_vs_steps_off": ratio("cpu_s"),
        "durable_ok": [one["ok"] for one in sessions[True]],
        "steps_off_ok": [one["ok"] for one in sessions[False]],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=1000, help="agents")
    parser.add_argument("--hosts", type=int, default=None, help="Grove's agent hosts")
    parser.add_argument(
        "--sessions", type=int, default=2, help="Groves with durable steps off, then on, in turn"
    )
    parser.add_argument(
        "--durable-only", action="store_true", help="only durable steps against none"
    )
    args = parser.parse_args()
    pacing = Pacing(ttft_ms=500, tps=50.0, tokens=40)
    sessions: dict[bool, list[dict[str, Any]]] = {False: [], True: []}
    with simulator_process(pacing) as simulator:
        for index in range(2 * args.sessions):
            durable = index % 2 == 1
            sessions[durable].append(durable_session(simulator, args.n, args.hosts, durable))
        steps = durable_figures(sessions)
        if args.durable_only:
            print(json.dumps({"bench": "tools", "n": args.n, "sessions": args.sessions, **steps}))
            return
        peer = asyncio.run(pydantic_ai_round(simulator, args.n))
        mcp = mcp_round(simulator, args.n)
    ours = sessions[True][-1]
    figures = {
        "bench": "tools",
        "n": args.n,
        "round_trips": ROUND_TRIPS,
        "simulator": pacing.as_dict(),
        "grove_wall_s": round(ours["wall_s"], 3),
        "pydantic_ai_wall_s": round(peer["wall_s"], 3),
        "ratio": round(ours["wall_s"] / peer["wall_s"], 3),
        "grove_ok": ours["ok"],
        "pydantic_ai_ok": peer["ok"],
        "pydantic_ai_errors": peer["errors"],
        "grove_tool_results_in_first_50": ours["tool_results_in_first_50"],
        "pydantic_ai_tool_results_in_first_50": peer["tool_results_in_first_50"],
        "grove_call_p50_ms": (
            round(statistics.median(ours["durations"]), 3) if ours["durations"] else None
        ),
        "direct_call_p50_ms": round(direct_call_ms(), 4),
        "grove_processes": len(ours["processes"]),
        "sessions": args.sessions,
        **steps,
        "mcp_hosts": MCP_HOSTS,
        "mcp_servers_configured": len(MCP_SERVERS),
        "mcp_ok": mcp["ok"],
        "mcp_tool_results_in_first_50": mcp["tool_results_in_first_50"],
        "mcp_server_processes": mcp["server_processes"],
        "mcp_server_processes_if_one_per_agent": args.n * len(MCP_SERVERS),
        "mcp_server_rss_mb": mcp["server_rss_mb"],
        "mcp_server_rss_mb_if_one_per_agent": round(
            mcp["server_rss_mb"] / max(1, mcp["server_processes"]) * args.n * len(MCP_SERVERS)
        ),
        "mcp_calls_per_s": mcp["calls_per_s"],
        "mcp_wall_s": round(mcp["wall_s"], 3),
    }
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
