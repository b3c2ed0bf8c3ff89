"""Benchmark: how closely a tree budget holds when 200 agents race it with replies longer than
what each request holds (`reserve_output = 20`, replies of 60 words): what they settled against
the limit, kept three ways. `finish` (the default) lets a reply that outgrew its hold finish,
so the limit is passed by what the replies in flight output beyond their holds; `strict` caps
each reply at its hold (goal: never past the limit); `cancel` cuts replies off when the budget
has no room left (goal: past it by at most the last delta of each cut reply).

Prints one JSON line. Run from the repository root: `python bench/budget.py`.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from harness import MODEL, Pacing, running_grove, simulator_process

from grove.supervisor import Budget

MODES: dict[str, dict[str, Any]] = {
    "finish": {},
    "strict": {"strict": True},
    "cancel": {"hard_stop": "cancel"},
}


def race(grove: Any, n: int, limit: int, mode: dict[str, Any]) -> dict[str, Any]:
    """`n` children of a root with a budget of `limit` tokens, all at once, to their end."""
    root = grove.create_root(MODEL, budget=Budget(tokens=limit, reserve_output=20, **mode)).uuid
    children = grove.fork_many(root, [f"Race {index}: describe the tea." for index in range(n)])
    results: dict[str, Any] = {}
    while len(results) < len(children):
        done = grove.wait_any([c for c in children if c not in results], 120)
        results |= {uuid: result for uuid, result in done.items() if result is not None}
    settled = sum(r.usage.input_tokens + r.usage.output_tokens for r in results.values())
    errors = [r.error or "" for r in results.values() if not r.ok]
    return {
        "settled": settled,
        "excess": settled - limit,
        "finished": n - len(errors),
        "refused": sum(not e.endswith("(the reply was cut off)") for e in errors),
        "cut_off": sum(e.endswith("(the reply was cut off)") for e in errors),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=200, help="agents racing one budget")
    parser.add_argument("--limit", type=int, default=4000, help="the budget's tokens")
    args = parser.parse_args()
    report: dict[str, Any] = {"bench": "budget", "n": args.n, "limit": args.limit}
    with (
        simulator_process(Pacing(ttft_ms=200, tps=200.0, tokens=60)) as simulator,
        running_grove(simulator) as grove,
    ):
        for name, mode in MODES.items():
            report[name] = race(grove, args.n, args.limit, mode)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
