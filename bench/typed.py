"""Benchmark: typed results. 1,000 batch tasks with a schema, a fifth of them answered malformed
first ([[sim invalid_output=1]]) and one in a thousand never well (invalid_output=3), against
the same batch without a schema, through `grove batch`'s runner (the two in turn, medians of
--rounds); then the same 1,000 tasks as pydantic-ai agents with `output_type` on the same
simulator.

Goals: >= 99.9% valid within 2 retries, the rest `invalid_output` with their text kept; the
typed batch <= 1.3x the plain one; Grove <= 0.2x pydantic-ai. Prints one JSON line. Run from
the repository root: `python bench/typed.py --n 1000`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from typing import Any, Literal

from harness import (
    MODEL,
    ExternalSimulator,
    Pacing,
    pydantic_ai_model,
    running_grove,
    simulator_process,
)
from pydantic import BaseModel

from grove.supervisor.batch.tasks import read_tasks

CONCURRENCY = 100
RETRIES = 2
TURN_TIMEOUT_S = 600.0


class Location(BaseModel):
    file: str
    line: int


class Finding(BaseModel):
    """One problem a review found."""

    severity: Literal["low", "medium", "high"]
    title: str
    where: Location
    tags: list[str]


def prompt(i: int) -> str:
    """Task i: a fifth answered malformed first, one in a thousand never well."""
    if i % 1000 == 999:
        return f"Review change {i}. [[sim invalid_output=3]]"
    if i % 5 == 0:
        return f"Review change {i}. [[sim invalid_output=1]]"
    return f"Review change {i}."


def tasks_text(n: int, typed: bool) -> bytes:
    return "".join(
        json.dumps({"id": i, "prompt": prompt(i) if typed else f"Review change {i}."}) + "\n"
        for i in range(n)
    ).encode()


def grove_round(simulator: ExternalSimulator, n: int, rounds: int) -> dict[str, Any]:
    """The plain batch and the typed one in turn, `rounds` times, on one started Grove (Ray's
    start-up not counted): each one's median wall time and its last run's records."""
    figures: dict[str, Any] = {"plain": {"walls": []}, "typed": {"walls": []}}
    with running_grove(simulator) as grove:
        for turn in range(rounds):
            for name, typed in (("plain", False), ("typed", True)):
                root = grove.create_root(MODEL).uuid
                tasks = read_tasks(tasks_text(n, typed)).tasks
                start = time.perf_counter()
                records = [
                    step
                    for step in grove.run_batch(
                        root,
                        tasks,
                        concurrency=CONCURRENCY,
                        key=f"{name}-{turn}",
                        output_type=Finding.model_json_schema() if typed else None,
                        output_retries=RETRIES,
                    )
                    if step is not None
                ]
                figures[name]["walls"].append(time.perf_counter() - start)
                figures[name]["records"] = records
    for figure in figures.values():
        figure["wall_s"] = statistics.median(figure["walls"])
    return figures


async def pydantic_ai_round(simulator: ExternalSimulator, n: int) -> dict[str, Any]:
    """The same tasks as pydantic-ai agents, as many in flight as Grove's batch has."""
    from pydantic_ai import Agent

    model = pydantic_ai_model(simulator, n, TURN_TIMEOUT_S)
    agent = Agent(model, output_type=Finding, retries={"output": RETRIES})
    gate = asyncio.Semaphore(CONCURRENCY)

    async def task(i: int) -> Finding:
        async with gate:
            return (await agent.run(prompt(i))).output

    start = time.perf_counter()
    results = await asyncio.gather(*(task(i) for i in range(n)), return_exceptions=True)
    wall = time.perf_counter() - start
    valid = sum(isinstance(result, Finding) for result in results)
    errors = sorted({type(r).__name__ for r in results if isinstance(r, BaseException)})
    return {"wall_s": wall, "valid": valid, "errors": errors}


def output_tokens(records: list[dict[str, Any]]) -> int:
    return sum(int(record["usage"].get("output_tokens", 0)) for record in records)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=1000, help="tasks")
    parser.add_argument("--rounds", type=int, default=3, help="plain and typed batches, in turn")
    args = parser.parse_args()
    pacing = Pacing(ttft_ms=300, tps=100.0, tokens=20)
    with simulator_process(pacing) as simulator:
        ours = grove_round(simulator, args.n, args.rounds)
        peer = asyncio.run(pydantic_ai_round(simulator, args.n))
    typed = ours["typed"]["records"]
    valid = [r for r in typed if r["status"] == "ok" and isinstance(r.get("output"), dict)]
    invalid = [r for r in typed if r["status"] == "invalid_output"]
    plain_s, typed_s = ours["plain"]["wall_s"], ours["typed"]["wall_s"]
    figures = {
        "bench": "typed",
        "n": args.n,
        "concurrency": CONCURRENCY,
        "output_retries": RETRIES,
        "simulator": pacing.as_dict(),
        "rounds": args.rounds,
        "plain_walls_s": [round(wall, 3) for wall in ours["plain"]["walls"]],
        "typed_walls_s": [round(wall, 3) for wall in ours["typed"]["walls"]],
        "plain_wall_s": round(plain_s, 3),
        "typed_wall_s": round(typed_s, 3),
        "typed_vs_plain": round(typed_s / plain_s, 3),
        "valid_share": round(len(valid) / args.n, 4),
        "retried": sum(1 for r in valid if r.get("output_retries")),
        "retry_tokens": sum(
            r["retry_usage"]["input_tokens"] + r["retry_usage"]["output_tokens"] for r in typed
        ),
        "invalid_output": len(invalid),
        "invalid_with_text": sum(1 for r in invalid if r["text"] and r["error"]),
        "plain_ok": sum(1 for r in ours["plain"]["records"] if r["status"] == "ok"),
        # What the simulator streamed: a typed answer (JSON made from the schema) is longer
        # than the plain reply's fixed length, and a retried task streams two.
        "plain_output_tokens": output_tokens(ours["plain"]["records"]),
        "typed_output_tokens": output_tokens(typed),
        "pydantic_ai_wall_s": round(peer["wall_s"], 3),
        "pydantic_ai_valid": peer["valid"],
        "pydantic_ai_errors": peer["errors"],
        "grove_vs_pydantic_ai": round(typed_s / peer["wall_s"], 3),
    }
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
