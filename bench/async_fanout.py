"""Benchmark: a fan-out of N asks from one asyncio program through `AsyncGrove` (all at once
with `asyncio.gather`), against the same N turns through `Grove.fork_many` + `wait_any`, in
the same run, on one Grove and one simulator in a process of its own; beside them, the same
`fork_many` + `wait_any` fan-out awaited through AsyncGrove.

Each round runs the three, in turn forward and backward (so neither is always first after a
quiet spell); a round's ratios are taken within it (rounds side by side in time share the
machine's load), and the median of the rounds' ratios is reported. Prints one JSON line;
`ratio` is the asks' wall time over Grove's (goal: within 1.05x), `fork_many_ratio` the
awaited fork_many fan-out's. All fan out from a root that holds the same context: the
fork_many rounds fork their children as part of their time, the asks go to children forked
beforehand with `fork` (`ratio_with_forks` counts those forks too; `asks_begin_s` is until
every ask's turn had started; `results_calls` how many host `results` calls brought the asks'
results). `cpu_s` is the CPU time driver, supervisor and hosts used in each (the asks' without
their forks), `cpu_ratio` the asks' over Grove's; `driver_cpu_s` and `driver_cpu_ratio` the
same for this process alone (the caller), and `full_collections` how many full collections
its garbage collector made during each kind over all rounds (counted, its settings left as
they are), `full_collections_s` their time. Before each timed fan-out (and between the asks'
forks and the asks) the collector's pending work is done, untimed (`gc.collect()`), so that
no kind pays a full collection for the garbage of what ran before it. Run from the repository root:
`python bench/async_fanout.py --n 1000`.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import time
from typing import Any

from fanout import CONTEXT, TURN_TIMEOUT_S, check, collect, median, prompts
from harness import MODEL, Pacing, cpu_s, grove_pids, running_grove, simulator_process

from grove.supervisor import AsyncGrove, Grove


class Driver:
    """This process's own share of each fan-out: its CPU time, and its garbage collector's
    full collections (counted through `gc.callbacks`, nothing else changed) and their time."""

    def __init__(self) -> None:
        self.full = 0
        self.full_s = 0.0
        self._began = 0.0
        self._settling = False
        gc.callbacks.append(self._collected)

    def settle(self) -> None:
        """Collect now, not counted: what runs next starts with no garbage of what ran
        before it."""
        self._settling = True
        try:
            gc.collect()
        finally:
            self._settling = False

    def _collected(self, phase: str, info: dict[str, int]) -> None:
        if info["generation"] != 2 or self._settling:
            return
        if phase == "start":
            self._began = time.perf_counter()
        else:
            self.full += 1
            self.full_s += time.perf_counter() - self._began

    def reading(self) -> tuple[float, int, float]:
        """CPU seconds, full collections and their seconds so far."""
        return time.process_time(), self.full, self.full_s


def since(driver: Driver, before: tuple[float, int, float]) -> tuple[float, int, float]:
    now = driver.reading()
    return now[0] - before[0], now[1] - before[1], now[2] - before[2]


def grove_round(grove: Any, root: str, texts: list[str]) -> tuple[float, dict[str, Any]]:
    """`fork_many` + `wait_any`: its wall time and every turn's result."""
    start = time.perf_counter()
    results = collect(grove, grove.fork_many(root, texts))
    return time.perf_counter() - start, results


async def asks_round(
    aio: AsyncGrove, root: str, texts: list[str], pids: list[int], driver: Driver
) -> dict[str, Any]:
    """Children forked (timed apart, their CPU time too), then one ask each, all at once."""
    start, used, driven = time.perf_counter(), cpu_s(pids), driver.reading()
    children = await asyncio.gather(*(aio.fork(root) for _ in texts))
    driver.settle()  # the forks' garbage is theirs: collected, and counted as theirs
    forked = time.perf_counter()
    forks_cpu_s = cpu_s(pids) - used
    forks_driver = since(driver, driven)
    turns = [aio.send(child, text) for child, text in zip(children, texts, strict=True)]
    await asyncio.gather(*turns)  # every turn started
    begun = time.perf_counter()
    answers = await asyncio.gather(*(turn.result(TURN_TIMEOUT_S) for turn in turns))
    asked = time.perf_counter()
    return {
        "forks_s": forked - start,
        "forks_cpu_s": forks_cpu_s,
        "forks_driver": forks_driver,
        "begin_s": begun - forked,
        "asks_s": asked - forked,
        "results": dict(zip(children, answers, strict=True)),
        "results_calls": local(aio).turn_starts.loop_turns().results.calls,
    }


def local(aio: AsyncGrove) -> Grove:
    """The Grove this bench runs on: its own, in this process."""
    assert isinstance(aio.grove, Grove)
    return aio.grove


async def fork_many_round(aio: AsyncGrove, root: str, texts: list[str]) -> dict[str, Any]:
    """`fork_many` + `wait_any` awaited through AsyncGrove."""
    start = time.perf_counter()
    pending = set(await aio.fork_many(root, texts))
    results: dict[str, Any] = {}
    while pending:
        done = await aio.wait_any(list(pending), 5.0)
        results |= done
        pending -= set(done)
    return {"wall_s": time.perf_counter() - start, "results": results}


KINDS = ("grove", "async_asks", "async_fork_many")


def run_kind(
    kind: str,
    grove: Any,
    aio: AsyncGrove,
    root: str,
    texts: list[str],
    walls: dict[str, list[Any]],
    pids: list[int],
    driver: Driver,
) -> tuple[float, dict[str, Any]]:
    """One fan-out of `kind`: its wall time and results (the asks' other figures go to
    `walls` directly)."""
    if kind == "grove":
        return grove_round(grove, root, texts)
    if kind == "async_asks":
        asks = asyncio.run(asks_round(aio, root, texts, pids, driver))
        walls["async_forks_cpu"].append(asks["forks_cpu_s"])
        walls["async_forks_driver"].append(asks["forks_driver"])
        walls["async_forks"].append(asks["forks_s"])
        walls["async_asks_begin"].append(asks["begin_s"])
        walls["results_calls"].append(asks["results_calls"])
        return asks["asks_s"], asks["results"]
    forked = asyncio.run(fork_many_round(aio, root, texts))
    return forked["wall_s"], forked["results"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=1000, help="asks (and fork_many children)")
    parser.add_argument("--rounds", type=int, default=9, help="alternating runs; medians count")
    Pacing.add_arguments(parser)
    args = parser.parse_args()
    pacing = Pacing.of(args)
    texts = prompts(args.n)
    walls: dict[str, list[Any]] = {
        "grove": [],
        "async_asks": [],
        "async_forks": [],
        "async_asks_begin": [],
        "async_fork_many": [],
        "results_calls": [],
        "async_forks_cpu": [],
        "async_forks_driver": [],
    }
    # CPU time of driver, supervisor and hosts in each fan-out (the asks' without their forks)
    cpu: dict[str, list[float]] = {kind: [] for kind in KINDS}
    driven: dict[str, list[tuple[float, int, float]]] = {kind: [] for kind in KINDS}
    driver = Driver()
    completed = stored = 0
    with simulator_process(pacing) as simulator, running_grove(simulator) as grove:
        root = grove.create_root(MODEL)
        if not grove.ask(root.uuid, CONTEXT).ok:
            raise SystemExit("async fanout bench: the context turn failed")
        aio = AsyncGrove(grove)
        pids = grove_pids(grove)  # this driver, the supervisor and the hosts
        for index in range(args.rounds):
            found = []
            for kind in KINDS if index % 2 == 0 else KINDS[::-1]:
                driver.settle()
                used, before = cpu_s(pids), driver.reading()
                wall, results = run_kind(kind, grove, aio, root.uuid, texts, walls, pids, driver)
                spent, own = cpu_s(pids) - used, since(driver, before)
                if kind == "async_asks":  # the forks before the asks apart
                    spent -= walls["async_forks_cpu"][-1]
                    forks = walls["async_forks_driver"][-1]
                    own = (own[0] - forks[0], own[1] - forks[1], own[2] - forks[2])
                cpu[kind].append(spent)
                driven[kind].append(own)
                walls[kind].append(wall)
                found.append(results)
            for results in found:
                checked = check(grove, results)
                completed += checked["ok"]
                stored += checked["stored"]
    ratios = {
        kind: [
            round(wall / grove_wall, 3)
            for wall, grove_wall in zip(walls[kind], walls["grove"], strict=True)
        ]
        for kind in ("async_asks", "async_fork_many")
    }
    with_forks = [
        round((forks + asks) / grove_wall, 3)
        for forks, asks, grove_wall in zip(
            walls["async_forks"], walls["async_asks"], walls["grove"], strict=True
        )
    ]
    grove_s, asks_s = median(walls["grove"]), median(walls["async_asks"])
    print(
        json.dumps(
            {
                "bench": "async_fanout",
                "n": args.n,
                "rounds": args.rounds,
                "simulator": pacing.as_dict(),
                "ideal_s": round(pacing.seconds, 3),
                "grove_wall_s": grove_s,
                "async_asks_wall_s": asks_s,
                "async_forks_s": median(walls["async_forks"]),
                "ratio": median(ratios["async_asks"]),
                "ratio_of_medians": round(asks_s / grove_s, 3),
                "ratio_with_forks": median(with_forks),
                "asks_begin_s": median(walls["async_asks_begin"]),
                "async_fork_many_wall_s": median(walls["async_fork_many"]),
                "fork_many_ratio": median(ratios["async_fork_many"]),
                "round_ratios": ratios,
                "cpu_s": {kind: median(values) for kind, values in cpu.items()},
                "async_forks_cpu_s": median(walls.pop("async_forks_cpu")),
                "cpu_ratio": median(
                    [asks / one for asks, one in zip(cpu["async_asks"], cpu["grove"], strict=True)]
                ),
                "driver_cpu_s": {
                    kind: round(median([own[0] for own in values]), 3)
                    for kind, values in driven.items()
                },
                "driver_cpu_ratio": median(
                    [
                        asks[0] / one[0]
                        for asks, one in zip(driven["async_asks"], driven["grove"], strict=True)
                    ]
                ),
                "full_collections": {
                    kind: sum(own[1] for own in values) for kind, values in driven.items()
                },
                "full_collections_s": {
                    kind: round(sum(own[2] for own in values), 3) for kind, values in driven.items()
                },
                "forks_full_collections": sum(f[1] for f in walls.pop("async_forks_driver")),
                "results_calls": walls.pop("results_calls"),
                "turns": args.n * args.rounds * 3,
                "completed": completed,
                "stored": stored,
                "walls": {name: [round(w, 3) for w in values] for name, values in walls.items()},
            }
        )
    )


if __name__ == "__main__":
    main()
