"""Benchmark: a one-shot prompt from the command line against one simulator (Chat Completions
wire, answering at once): `grove run --model gpt-6.1-terra "hello there"`.

First, in alternation, today's run without a service (`grove --no-service run`: Ray started for
the one prompt) and the first run with none up, which starts one in the background and uses it
(`[service] autostart`; `grove down` after each but the last): `first_vs_no_service`. Then,
with that service up, the next runs against the `llm` CLI with the same model declared in its
extra-openai-models.yaml (goal: at most 0.5x llm's wall time), medians of alternating warm
runs: `second_vs_llm`; also `grove --help`, `grove agents` and `grove status` (goal: each at
most 0.3 s). The service's own count of requests served shows the warm runs went to it.

Prints one JSON line. Run from the repository root: `python bench/cli_latency.py --runs 10`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=10, help="alternating warm runs of each")
    parser.add_argument(
        "--cold-runs", type=int, default=3, help="alternating runs without a service up"
    )
    args = parser.parse_args()
    grove = [str(Path(sys.executable).with_name("grove"))]
    llm = shutil.which("llm", path=str(Path(sys.executable).parent))
    if llm is None:
        raise SystemExit("cli bench: the llm CLI is missing: pip install -e '.[bench]'")
    report: dict[str, Any] = {
        "bench": "cli",
        "runs": args.runs,
        "cold_runs": args.cold_runs,
        "model": MODEL,
    }
    run = [*grove, "run", "--model", MODEL, PROMPT]
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
            **{key: value for key, value in os.environ.items() if key != "GROVE_NO_SERVICE"},
            "LLM_USER_PATH": str(llm_dir),
            "XDG_CONFIG_HOME": str(home / "config"),
            "GROVE_CONFIG_FILE": str(home / "none.toml"),
            "GROVE_STORE": f"sqlite:///{home / 'grove.sqlite3'}",
            "OPENAI_BASE_URL": simulator.base_url,
            "OPENAI_API_KEY": simulator.api_key,
            "GROVE_PROVIDERS__OPENAI__API": "chat",
        }
        walls: dict[str, list[float]] = {"grove_run_no_service": [], "grove_run_first": []}
        try:
            for index in range(args.cold_runs):
                walls["grove_run_no_service"].append(timed([*grove, "--no-service", *run[1:]], env))
                walls["grove_run_first"].append(timed(run, env))  # starts the service
                if index < args.cold_runs - 1:
                    timed([*grove, "down"], env)
            served = requests_served(grove, env)
            walls.update(grove_run_second=[], llm=[])
            for _ in range(args.runs + 1):  # the first of each warms the caches
                walls["grove_run_second"].append(timed(run, env))
                walls["llm"].append(timed([llm, "-m", f"sim-{MODEL}", PROMPT], env))
            if requests_served(grove, env) < served + args.runs + 1:
                raise SystemExit("cli bench: the warm runs did not all go to the service")
            quick = {
                "grove_help": [*grove, "--help"],
                "grove_agents": [*grove, "agents"],
                "grove_status": [*grove, "status"],
            }
            for label, command in quick.items():
                walls[label] = [timed(command, env) for _ in range(args.runs + 1)]
        finally:
            subprocess.run([*grove, "down"], env=env, capture_output=True, check=False)
    cold = {"grove_run_no_service", "grove_run_first"}
    medians = {
        label: round(median(values if label in cold else values[1:]), 3)
        for label, values in walls.items()
    }
    report.update({f"{label}_s": value for label, value in medians.items()})
    report["second_vs_llm"] = round(medians["grove_run_second"] / medians["llm"], 3)
    report["first_vs_no_service"] = round(
        medians["grove_run_first"] / medians["grove_run_no_service"], 3
    )
    print(json.dumps(report))


def requests_served(grove: list[str], env: dict[str, str]) -> int:
    """What the running service says it has served; it must be one a command started."""
    done = subprocess.run([*grove, "status", "--json"], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"cli bench: no service is up: {done.stderr.strip()}")
    status = json.loads(done.stdout)
    if not status["autostarted"]:
        raise SystemExit("cli bench: the service up is not the one the first run started")
    served: int = status["requests"]
    return served


if __name__ == "__main__":
    main()
