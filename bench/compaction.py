"""Benchmark: a 200-turn session against a simulator that enforces a 32,000-token window, with
each compaction strategy (summary, snapcompact) and without compaction; and snapcompact's
frames against the text they replace.

Prints one JSON line: for each session, the turns that completed, the first failed turn and its
error, the input tokens the requests carried (max and mean) and the compactions made; for
frames, per provider, the tokens they bill against the text's (goal: <= 0.5x) and the time to
build them per 100,000 characters (goal: under 1 s). Run: `python bench/compaction.py`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

from harness import MODEL, Pacing, running_grove, simulator_process

from grove.supervisor.snapcompact import archive, frame_tokens

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


def frames_against_text(chars: int = 100_000, rounds: int = 3) -> dict[str, Any]:
    """Per provider: billed tokens of the frames / the text's tokens (4 characters a token),
    and the best of `rounds` times to build the frames of `chars` characters."""
    sentence = "[assistant]: I read parser.py, fixed the loop that dropped the last line. "
    text = (sentence * (chars // len(sentence) + 1))[:chars]
    figures: dict[str, Any] = {}
    for provider in ("anthropic", "openai", "google"):
        times = []
        for _ in range(rounds):
            started = time.perf_counter()
            made = archive(text, provider)
            times.append(time.perf_counter() - started)
        framed_chars = chars - len(made.text_tail)
        figures[provider] = {
            "shape": made.shape,
            "frames": len(made.frames),
            "billed_ratio": round(frame_tokens(provider, made.frames) / (framed_chars / 4), 3),
            "build_s_per_100k_chars": round(min(times) * 100_000 / chars, 3),
        }
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=200)
    args = parser.parse_args()
    with simulator_process(Pacing(ttft_ms=0, tps=0, tokens=24), context_window=WINDOW) as sim:
        compacting = {"enabled": True, "keep_recent_tokens": 8_000}
        summary = session(sim, args.turns, compacting)
        snap = session(sim, args.turns, {**compacting, "strategy": "snapcompact"})
        without = session(sim, args.turns, {"enabled": False})
    print(
        json.dumps(
            {
                "bench": "compaction",
                "turns": args.turns,
                "window": WINDOW,
                "summary": summary,
                "snapcompact": snap,
                "without_compaction": without,
                "frames": frames_against_text(),
            }
        )
    )


if __name__ == "__main__":
    main()
