"""Benchmark: a 200-turn session against a simulator that enforces a 32,000-token window, with
compaction on and without it.

Prints one JSON line: for each run, the turns that completed, the first failed turn and its
error, and the input tokens the requests carried (max and mean over the turns), plus the
compactions made. Run from the repository root: `python bench/compaction.py`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

from harness import MODEL, Pacing, running_grove, simulator_process

WINDOW = 32_000
REPLY_TOKENS = 120
FILLER = "The service reads orders from a queue, prices them and stores invoices. "


def prompt(turn: int) -> str:
    """About 400 tokens of a long session's work, with a reply of REPLY_TOKENS."""
    return f"[[sim tokens={REPLY_TOKENS}]] Turn {turn}: " + FILLER * 22


def session(simulator: Any, turns: int, compaction: dict[str, Any]) -> dict[str, Any]:
    sections = {"compaction": compaction}
    inputs: list[int] = []
    failed: dict[str, Any] | None = None
    started = time.perf_counter()
    with running_grove(simulator, hosts=1, sections=sections) as grove:
        root = grove.create_root(MODEL).uuid
        for turn in range(1, turns + 1):
            result = grove.ask(root, prompt(turn))
            if not result.ok:
                failed = {"turn": turn, "error": (result.error or "")[:160]}
                break
            last = [m for m in grove.history(root)[-3:] if m.kind == "assistant"][-1]
            inputs.append(int(last.data["usage"]["input_tokens"]))
        compactions = [m for m in grove.history(root) if m.kind == "compaction"]
        reasons = sorted({str(m.data.get("reason")) for m in compactions})
    return {
        "turns_completed": len(inputs),
        "first_failed": failed,
        "input_tokens_max": max(inputs, default=0),
        "input_tokens_mean": round(statistics.fmean(inputs)) if inputs else 0,
        "compaction_reasons": reasons,
        "wall_s": round(time.perf_counter() - started, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=200)
    args = parser.parse_args()
    with simulator_process(Pacing(ttft_ms=0, tps=0, tokens=24), context_window=WINDOW) as sim:
        summary = session(sim, args.turns, {"enabled": True, "keep_recent_tokens": 8_000})
        without = session(sim, args.turns, {"enabled": False})
    print(
        json.dumps(
            {
                "bench": "compaction",
                "turns": args.turns,
                "window": WINDOW,
                "summary": summary,
                "without_compaction": without,
            }
        )
    )


if __name__ == "__main__":
    main()
