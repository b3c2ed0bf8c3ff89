"""Benchmark: provider prompt caching on a batch. N tasks share a 20,000-token context, run by
`grove batch`'s runner on each provider's wire (Anthropic, OpenAI, Gemini): what the simulator
billed with caching, against `[cache] enabled = false`, in the same run. On Anthropic also
against what users would pick instead, on the same simulator at the same concurrency:
pydantic-ai with its Anthropic cache settings, and the anthropic SDK with a hand-placed
`cache_control` on the shared context.

The simulator bills each provider's caching (readable once the writing reply began) and its
time to first token grows with the prompt not read from a cache (`--prefill-tps`), as a cache
hit shortens it. Prints one JSON line. `python bench/caching.py --n 1000 --concurrency 100`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import httpx2  # the anthropic SDK's own HTTP client
from harness import ExternalSimulator, Pacing, running_grove, simulator_process

from grove.providers.base import Usage
from grove.providers.catalog import DEFAULT_MODELS
from grove.providers.pricing import cost_usd
from grove.supervisor.batch.records import OutputLog, record_results
from grove.supervisor.batch.summary import Totals
from grove.supervisor.batch.tasks import Task

MODELS: dict[str, str] = {name: model for name, model in DEFAULT_MODELS.items()}  # defaults
APIS = {"anthropic": "anthropic", "openai": "openai-responses", "google": "google"}
CONTEXT_TOKENS = 20_000
ANTHROPIC_TTL_S = 300.0
TIMEOUT_S = 900.0


def context_text(tag: str = "") -> str:
    """About CONTEXT_TOKENS tokens as the simulator counts them (four characters a token),
    different for each `tag`."""
    words, length, n = [tag], len(tag), 0
    while length < CONTEXT_TOKENS * 4:
        word = f"guide-{n}"
        words.append(word)
        length += len(word) + 1
        n += 1
    return " ".join(words)


def prompts(n: int) -> list[str]:
    return [f"Task {i}: which rule of the guide applies to order {i}? One line." for i in range(n)]


def stats(simulator: ExternalSimulator) -> dict[str, Any]:
    answer = httpx.get(simulator.base_url + "/_simulator/stats", timeout=30)
    answer.raise_for_status()
    data: dict[str, Any] = answer.json()
    return data


def billed_since(simulator: ExternalSimulator, before: dict[str, Any], api: str) -> dict[str, int]:
    now = stats(simulator)["billed_by_api"].get(api, {})
    then = before["billed_by_api"].get(api, {})
    return {name: value - then.get(name, 0) for name, value in now.items()}


def priced(model: str, billed: dict[str, int]) -> float:
    usage = Usage(
        input_tokens=billed["input_tokens"],
        output_tokens=billed["output_tokens"],
        cache_read_tokens=billed["cache_read_tokens"],
        cache_write_tokens=billed["cache_write_tokens"],
    )
    return cost_usd(model, usage)


def grove_batch(
    grove: Any,
    simulator: ExternalSimulator,
    provider: str,
    texts: list[str],
    concurrency: int,
    tag: str,
) -> dict[str, Any]:
    """One batch through `grove batch`'s runner: a root holding a context no earlier batch
    sent (`tag`), the tasks forked from it; what the simulator billed and the records say."""
    model = MODELS[provider]
    root = grove.create_root(model).uuid
    context = context_text(tag)
    grove.seed(root, [("user", context), ("assistant", "Understood: I will apply the guide.")])
    tasks = [Task(id=n, key=str(n), line=n + 1, prompt=text) for n, text in enumerate(texts)]
    before = stats(simulator)
    with tempfile.TemporaryDirectory(prefix="grove-bench-caching-") as directory:
        output = Path(directory) / "out.jsonl"
        totals = Totals(total=len(tasks))
        start = time.perf_counter()
        with OutputLog(output) as log:
            key = f"{provider}-{root}"
            steps = grove.run_batch(root, tasks, concurrency=concurrency, key=key)
            for _ in record_results(steps, log, totals):
                pass
        wall = time.perf_counter() - start
        records = [json.loads(line) for line in output.read_text().splitlines()]
    billed = billed_since(simulator, before, APIS[provider])
    reads = [r["usage"].get("cache_read_tokens", 0) for r in records if r["status"] == "ok"]
    prefix = max(reads, default=0)
    explicit = stats(simulator)["cached_contents"]
    return {
        "wall_s": round(wall, 3),
        "ok": sum(r["status"] == "ok" for r in records),
        "billed": billed,
        "cost_usd": round(priced(model, billed), 4),
        "prefix_tokens": prefix,
        "prefix_read_share": round(sum(reads) / (len(tasks) * prefix), 4) if prefix else 0.0,
        "explicit_live_after": explicit["live"],
        "saved_usd_recorded": round(totals.saved_usd, 4),
    }


def warm_up_cost(grove: Any, concurrency: int, cold: float) -> dict[str, float]:
    """How long `fork_many` of `concurrency` children takes from a cold Anthropic prefix, with
    its warm-up, against the time to first token of a cold request (`cold`)."""
    root = grove.create_root(MODELS["anthropic"]).uuid
    grove.seed(root, [("user", context_text("warm-up")), ("assistant", "OK.")])
    start = time.perf_counter()
    children = grove.fork_many(root, prompts(concurrency))
    forked = time.perf_counter() - start
    pending = set(children)
    while pending:
        pending -= set(grove.wait_any(list(pending), 10))
    return {"fork_many_s": round(forked, 3), "cold_ttft_s": round(cold, 3)}


def sdk_client(simulator: ExternalSimulator, concurrency: int) -> Any:
    """An AsyncAnthropic whose pool is as large as the concurrency (its default would queue
    the requests, and the figure would measure that)."""
    from anthropic import AsyncAnthropic

    limits = httpx2.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    return AsyncAnthropic(
        base_url=simulator.base_url,
        api_key=simulator.api_key,
        max_retries=0,
        http_client=httpx2.AsyncClient(limits=limits, timeout=TIMEOUT_S),
    )


async def anthropic_sdk_round(
    simulator: ExternalSimulator, texts: list[str], concurrency: int
) -> dict[str, Any]:
    """The official SDK, the context as a system block with a hand-placed `cache_control`."""
    client = sdk_client(simulator, concurrency)
    system: Any = [
        {
            "type": "text",
            "text": context_text("sdk"),
            "cache_control": {"type": "ephemeral"},
        }
    ]
    gate = asyncio.Semaphore(concurrency)

    async def one(text: str) -> bool:
        async with gate:
            message = await client.messages.create(
                model=MODELS["anthropic"],
                max_tokens=1024,
                system=system,
                messages=[{"role": "user", "content": text}],
            )
        return bool(message.content)

    start = time.perf_counter()
    results = await asyncio.gather(*(one(text) for text in texts), return_exceptions=True)
    return {"wall_s": time.perf_counter() - start, "ok": sum(r is True for r in results)}


async def pydantic_ai_round(
    simulator: ExternalSimulator, texts: list[str], concurrency: int
) -> dict[str, Any]:
    """pydantic-ai, the context as the agent's instructions, cached as its settings offer."""
    from pydantic_ai import Agent
    from pydantic_ai.models.anthropic import AnthropicModel, AnthropicModelSettings
    from pydantic_ai.providers.anthropic import AnthropicProvider

    client = sdk_client(simulator, concurrency)
    model = AnthropicModel(MODELS["anthropic"], provider=AnthropicProvider(anthropic_client=client))
    settings = AnthropicModelSettings(
        anthropic_cache_instructions=True, anthropic_cache_messages=True, max_tokens=1024
    )
    agent = Agent(model, instructions=context_text("pydantic"), model_settings=settings)
    gate = asyncio.Semaphore(concurrency)

    async def one(text: str) -> bool:
        async with gate:
            result = await agent.run(text)
        return bool(result.output)

    start = time.perf_counter()
    results = await asyncio.gather(*(one(text) for text in texts), return_exceptions=True)
    errors = sorted({type(r).__name__ for r in results if isinstance(r, BaseException)})
    return {
        "wall_s": time.perf_counter() - start,
        "ok": sum(r is True for r in results),
        "errors": errors,
    }


def peer(
    simulator: ExternalSimulator, name: str, texts: list[str], concurrency: int
) -> dict[str, Any]:
    before = stats(simulator)
    run = anthropic_sdk_round if name == "anthropic_sdk" else pydantic_ai_round
    figures = asyncio.run(run(simulator, texts, concurrency))
    billed = billed_since(simulator, before, "anthropic")
    return {
        **figures,
        "wall_s": round(figures["wall_s"], 3),
        "billed": billed,
        "cost_usd": round(priced(MODELS["anthropic"], billed), 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=1000, help="tasks per batch")
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--ttft-ms", type=int, default=300)
    parser.add_argument("--tps", type=float, default=200.0)
    parser.add_argument("--tokens", type=int, default=20)
    parser.add_argument(
        "--prefill-tps", type=float, default=10_000.0, help="prompt tokens a second before the "
        "first token, those read from a cache aside (Anthropic's own figure for a 100,000-token "
        "prompt, 11.5 s uncached against 2.4 s cached, is about 11,000)"
    )  # fmt: skip
    parser.add_argument(
        "--providers", default="anthropic,openai,google", help="comma-separated: which wires"
    )
    args = parser.parse_args()
    pacing = Pacing(ttft_ms=args.ttft_ms, tps=args.tps, tokens=args.tokens)
    texts = prompts(args.n)
    chosen = [name for name in args.providers.split(",") if name]
    report: dict[str, Any] = {
        "bench": "caching",
        "n": args.n,
        "concurrency": args.concurrency,
        "simulator": {**pacing.as_dict(), "prefill_tps": args.prefill_tps},
    }
    runs: dict[str, dict[str, Any]] = {}
    with simulator_process(pacing, prefill_tps=args.prefill_tps) as simulator:
        for mode, sections in (("cached", {}), ("uncached", {"cache": {"enabled": False}})):
            with running_grove(simulator, sections=sections) as grove:
                for provider in chosen:
                    runs[f"{provider}_{mode}"] = grove_batch(
                        grove, simulator, provider, texts, args.concurrency, f"{provider}-{mode}"
                    )
                if mode == "cached" and "anthropic" in chosen:
                    cold = pacing.ttft_ms / 1000 + CONTEXT_TOKENS / args.prefill_tps
                    report["warm_up"] = warm_up_cost(grove, args.concurrency, cold)
        if "anthropic" in chosen:
            for name in ("pydantic_ai", "anthropic_sdk"):
                runs[name] = peer(simulator, name, texts, args.concurrency)
    for provider in chosen:
        cached, uncached = runs[f"{provider}_cached"], runs[f"{provider}_uncached"]
        figures = {
            "cost_ratio": round(cached["cost_usd"] / uncached["cost_usd"], 4),
            "prefix_read_share": cached["prefix_read_share"],
            "cold_writes": cached["billed"]["cold_writes"],
            "wall_ratio": round(cached["wall_s"] / uncached["wall_s"], 3),
        }
        if provider == "anthropic":
            figures["writes_allowed"] = math.ceil(cached["wall_s"] / ANTHROPIC_TTL_S)
            for name in ("pydantic_ai", "anthropic_sdk"):
                figures[f"cost_vs_{name}"] = round(cached["cost_usd"] / runs[name]["cost_usd"], 4)
                figures[f"wall_vs_{name}"] = round(cached["wall_s"] / runs[name]["wall_s"], 3)
        report[provider] = figures
    report["runs"] = runs
    print(json.dumps(report))


if __name__ == "__main__":
    main()
