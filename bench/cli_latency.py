"""Benchmark: a one-shot prompt from the command line, warm, against one simulator (Chat
Completions wire, answering at once): `grove run --model gpt-6.1-terra "hello there"` with a Grove
service up (`grove up`), the same command as without one, against the `llm` CLI with the same
model declared in its extra-openai-models.yaml (goal: at most 0.5x llm's wall time), medians
of alternating runs; also `grove --help`, `grove agents` and `grove status` (goal: each at most
0.3 s), and `grove run` with no service (Ray started for the one prompt).

Prints one JSON line. Run from the repository root: `python bench/cli_latency.py --runs 10`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median
from typing import Any

from harness import REPO_ROOT, Pacing, simulator_process

MODEL = "gpt-6.1-terra"
PROMPT = "hello there"


def timed(command: list[str], env: dict[str, str]) -> float:
    """Wall seconds of one run, which must succeed."""
    start = time.perf_counter()
    done = subprocess.run(command, env=env, cwd=REPO_ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"cli bench: {command[:3]} failed: {done.stderr[-2000:]}")
    return seconds


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=10, help="alternating runs of each")
    args = parser.parse_args()
    grove = [str(Path(sys.executable).with_name("grove"))]
    llm = shutil.which("llm", path=str(Path(sys.executable).parent))
    if llm is None:
        raise SystemExit("cli bench: the llm CLI is missing: pip install -e '.[bench]'")
    report: dict[str, Any] = {"bench": "cli", "runs": args.runs, "model": MODEL}
    with (
        tempfile.TemporaryDirectory(prefix="grove-bench-cli-") as name,
        simulator_process(Pacing(ttft_ms=0, tps=0, tokens=8)) as simulator,
    ):
        home = Path(name)
        llm_dir = home / "llm"
        llm_dir.mkdir()
        (llm_dir / "extra-openai-models.yaml").write_text(
            f"- model_id: sim-{MODEL}\n  model_name: {MODEL}\n"
            f"  api_base: {simulator.base_url}/v1\n  api_key_name: simulator\n"
        )
        (llm_dir / "keys.json").write_text(json.dumps({"simulator": simulator.api_key}))
        env = {
            **os.environ,
            "LLM_USER_PATH": str(llm_dir),
            "XDG_CONFIG_HOME": str(home / "config"),
            "GROVE_CONFIG_FILE": str(home / "none.toml"),
            "GROVE_STORE": f"sqlite:///{home / 'grove.sqlite3'}",
            "OPENAI_BASE_URL": simulator.base_url,
            "OPENAI_API_KEY": simulator.api_key,
            "GROVE_PROVIDERS__OPENAI__API": "chat",
        }
        report["grove_run_without_service_s"] = round(
            timed([*grove, "run", "--model", MODEL, PROMPT], env), 3
        )
        timed([*grove, "up", "--port", str(free_port())], env)
        try:
            walls: dict[str, list[float]] = {"grove_run": [], "llm": []}
            for _ in range(args.runs + 1):  # the first of each warms the caches
                walls["grove_run"].append(timed([*grove, "run", "--model", MODEL, PROMPT], env))
                walls["llm"].append(timed([llm, "-m", f"sim-{MODEL}", PROMPT], env))
            quick = {
                "grove_help": [*grove, "--help"],
                "grove_agents": [*grove, "agents"],
                "grove_status": [*grove, "status"],
            }
            for label, command in quick.items():
                walls[label] = [timed(command, env) for _ in range(args.runs + 1)]
        finally:
            timed([*grove, "down"], env)
    medians = {label: round(median(values[1:]), 3) for label, values in walls.items()}
    report.update({f"{label}_s": value for label, value in medians.items()})
    report["grove_run_vs_llm"] = round(medians["grove_run"] / medians["llm"], 3)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
