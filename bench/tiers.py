"""Benchmark: half-price fleets (SPEC 20). N tasks fork from a root holding a cached guide of
about 20,000 tokens; each calls one tool, then answers. Grove runs them on its standard tier
and on its batch tier, and pydantic-ai runs the same tasks through its own batch support
(`BatchModelRequests`, with its Anthropic cache settings), all on one simulator whose batches
end `--batch-delay-s` after they are sent.

Prints one JSON line: what each run was billed (the simulator's counts, each tier at its
price), Grove's batch cost over its standard cost (goal: <= 0.55x, caching on in both), the
batch run's wall time in batch rounds per step (a round is `[tiers] batch_window_s` plus the
batch delay; goal: <= 2 rounds per step plus 10%, so <= 2.2), and pydantic-ai's figures.
Run from the repository root: `python bench/tiers.py --n 1000` (needs the bench extras).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from datetime import timedelta
from typing import Any

from caching import context_text
from harness import (
    MODEL,
    ExternalSimulator,
    Pacing,
    pydantic_ai_model,
    running_grove,
    simulator_process,
    simulator_stats,
)

from grove.providers.base import Usage
from grove.providers.pricing import cost_usd

# Each task's steps: the one that calls the tool, the one that answers.
STEPS_PER_TASK = 2
TURN_TIMEOUT_S = 1800.0
WAIT_SLICE_S = 5.0


async def lookup(key: str) -> str:
    """Look a key up in the inventory."""
    return f"{key}: 3 in stock"


def prompt(index: int) -> str:
    """A task whose reply calls `lookup` once, then answers."""
    call = json.dumps({"key": f"item-{index}"})
    return f"[[sim tool=lookup args='{call}' step=1]] Task {index}: which guide rule applies?"


def billed_usd(before: dict[str, Any], after: dict[str, Any]) -> tuple[float, dict[str, int]]:
    """What the simulator billed between two readings of its stats, each tier at its price
    (per request on the average prompt, so a sum of prompts never reaches long-context
    rates), and how many requests each tier took."""
    total, requests = 0.0, {}
    for tier, now in after["billed_by_tier"].items():
        then = before["billed_by_tier"].get(tier, {})
        spent = {name: int(now[name]) - int(then.get(name, 0)) for name in now}
        count = spent["requests"]
        if count <= 0:
            continue
        usage = Usage(
            input_tokens=spent["input_tokens"] // count,
            output_tokens=spent["output_tokens"] // count,
            cache_read_tokens=spent["cache_read_tokens"] // count,
            cache_write_tokens=spent["cache_write_tokens"] // count,
        )
        total += cost_usd(MODEL, usage, tier=tier) * count
        requests[tier] = count
    return round(total, 4), requests


def grove_round(simulator: ExternalSimulator, n: int, tier: str, window_s: float) -> dict[str, Any]:
    """N forks of one root on `tier`, waited for; their wall time, bill and outcomes."""
    sections = {"tiers": {"batch_window_s": window_s}}
    with running_grove(simulator, sections=sections) as grove:
        guide = context_text("grove")
        root = grove.create_root(MODEL, system=guide, tools=[lookup], tier=tier).uuid
        before = simulator_stats(simulator)
        start = time.perf_counter()
        children = grove.fork_many(root, [prompt(i) for i in range(n)])
        pending, ok = set(children), 0
        deadline = time.monotonic() + TURN_TIMEOUT_S
        while pending:
            if time.monotonic() > deadline:
                raise SystemExit(f"tiers bench: {len(pending)} Grove turns still running")
            for uuid, result in grove.wait_any(list(pending), WAIT_SLICE_S).items():
                pending.discard(uuid)
                ok += bool(result is not None and result.ok)
        wall = time.perf_counter() - start
        cost, requests = billed_usd(before, simulator_stats(simulator))
    return {"wall_s": round(wall, 3), "ok": ok, "cost_usd": cost, "requests": requests}


async def pydantic_ai_round(
    simulator: ExternalSimulator, n: int, window_s: float, poll_s: float
) -> dict[str, Any]:
    """The same tasks through pydantic-ai's batch capability: one agent, the guide as its
    instructions cached as its settings offer, batches sent at N requests or `window_s`."""
    from pydantic_ai import Agent
    from pydantic_ai.capabilities import BatchModelRequests
    from pydantic_ai.models.anthropic import AnthropicModelSettings

    batching = BatchModelRequests(
        max_requests=n,
        max_wait=timedelta(seconds=window_s),
        poll_interval=timedelta(seconds=poll_s),
        max_poll_interval=timedelta(seconds=poll_s),
    )
    settings = AnthropicModelSettings(
        anthropic_cache_instructions=True, anthropic_cache_messages=True, max_tokens=1024
    )
    agent = Agent(
        pydantic_ai_model(simulator, n, TURN_TIMEOUT_S),
        instructions=context_text("pydantic"),
        tools=[lookup],
        model_settings=settings,
        capabilities=[batching],
    )
    before = simulator_stats(simulator)
    start = time.perf_counter()
    async with batching:
        results = await asyncio.gather(
            *(agent.run(prompt(i)) for i in range(n)), return_exceptions=True
        )
    wall = time.perf_counter() - start
    cost, requests = billed_usd(before, simulator_stats(simulator))
    errors = sorted({type(r).__name__ for r in results if isinstance(r, BaseException)})
    ok = sum(not isinstance(r, BaseException) for r in results)
    return {
        "wall_s": round(wall, 3),
        "ok": ok,
        "cost_usd": cost,
        "requests": requests,
        "errors": errors,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=1000, help="tasks")
    parser.add_argument("--batch-delay-s", type=float, default=5.0, help="a batch's processing")
    parser.add_argument(
        "--window-s", type=float, default=1.0, help="[tiers] batch_window_s of both runs"
    )
    parser.add_argument("--poll-s", type=float, default=1.0, help="pydantic-ai's poll interval")
    args = parser.parse_args()
    pacing = Pacing(ttft_ms=200, tps=200.0, tokens=40)
    with simulator_process(pacing, batch_delay_s=args.batch_delay_s) as simulator:
        standard = grove_round(simulator, args.n, "standard", args.window_s)
        batch = grove_round(simulator, args.n, "batch", args.window_s)
        peer = asyncio.run(pydantic_ai_round(simulator, args.n, args.window_s, args.poll_s))
    round_s = args.window_s + args.batch_delay_s

    def ratio(part: float, whole: float) -> float | None:
        """None when the run it is measured against billed nothing (its requests all failed)."""
        return round(part / whole, 3) if whole else None

    figures = {
        "bench": "tiers",
        "n": args.n,
        "batch_delay_s": args.batch_delay_s,
        "window_s": args.window_s,
        "grove_standard": standard,
        "grove_batch": batch,
        "pydantic_ai_batch": peer,
        "batch_cost_vs_standard": ratio(batch["cost_usd"], standard["cost_usd"]),
        "rounds_per_step": round(batch["wall_s"] / (STEPS_PER_TASK * round_s), 3),
        "batch_cost_vs_pydantic_ai": ratio(batch["cost_usd"], peer["cost_usd"]),
        "batch_wall_vs_pydantic_ai": ratio(batch["wall_s"], peer["wall_s"]),
    }
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
