"""Benchmark: a batch of tasks at a fixed concurrency against the ideal bound (concurrency /
the simulated latency of one task), through `grove batch`'s own runner and its command line:
once starting Ray of its own, once joining a running two-node local cluster with `--address`.

Prints one JSON line. Run from the repository root: `python bench/batch.py --n 2000`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness import (
    MODEL,
    REPO_ROOT,
    ExternalSimulator,
    Pacing,
    quiet_config,
    ray_cluster,
    running_grove,
    simulator_process,
)

from grove.supervisor.batch.records import OutputLog, record_results
from grove.supervisor.batch.summary import Totals
from grove.supervisor.batch.tasks import read_tasks

COMMAND_TIMEOUT_S = 900.0
CONTEXT = [
    ("user", "Our shop sells 40 kinds of tea. Answer each question about it in one sentence."),
    ("assistant", "Understood: one sentence per question about the tea shop."),
]


def write_inputs(directory: Path, n: int) -> tuple[Path, Path]:
    tasks = directory / "tasks.jsonl"
    tasks.write_text(
        "".join(
            json.dumps({"id": i, "prompt": f"Question {i}: which tea suits customer {i}?"}) + "\n"
            for i in range(n)
        )
    )
    context = directory / "context.jsonl"
    context.write_text(
        "".join(json.dumps({"role": role, "content": text}) + "\n" for role, text in CONTEXT)
    )
    return tasks, context


def ok_ids(output: Path) -> list[Any]:
    records = [json.loads(line) for line in output.read_text().splitlines() if line.strip()]
    return [record["id"] for record in records if record["status"] == "ok"]


def runner_seconds(
    simulator: ExternalSimulator, tasks: Path, output: Path, concurrency: int
) -> float:
    """The batch runner of `grove batch` on a started Grove: Ray's start-up is not counted."""
    task_file = read_tasks(tasks.read_bytes())
    with running_grove(simulator) as grove, OutputLog(output) as log:
        root = grove.create_root(MODEL).uuid
        grove.seed(root, CONTEXT)
        totals = Totals(total=len(task_file.tasks))
        start = time.perf_counter()
        steps = grove.run_batch(root, task_file.tasks, concurrency=concurrency)
        for _ in record_results(steps, log, totals):
            pass
        seconds = time.perf_counter() - start
    return seconds


def provider_env(simulator: ExternalSimulator) -> dict[str, str]:
    """Where the agents' provider is and its key: for the command, and for a cluster's nodes."""
    return {"ANTHROPIC_BASE_URL": simulator.base_url, "ANTHROPIC_API_KEY": simulator.api_key}


def command_seconds(
    simulator: ExternalSimulator,
    tasks: Path,
    context: Path,
    output: Path,
    concurrency: int,
    cluster: dict[str, str] | None = None,
) -> tuple[float, int]:
    """`grove batch` as a command, start-up included (Ray's own too unless it joins the
    running cluster that `cluster`'s environment names): its wall time and exit code."""
    environment = {
        **os.environ,
        **provider_env(simulator),
        "GROVE_STORE": f"sqlite:///{output.parent / 'cli.sqlite3'}",
        "GROVE_NO_SERVICE": "1",  # its own Ray (or the cluster's), no service started for it
        **(cluster or {}),
    }
    command = [
        sys.executable, "-m", "grove.cli.app", "batch", str(tasks), "--context", str(context),
        "--model", MODEL, "--concurrency", str(concurrency), "--output", str(output),
        *(["--address", cluster["RAY_ADDRESS"]] if cluster else []),
    ]  # fmt: skip
    start = time.perf_counter()
    finished = subprocess.run(
        command,
        cwd=REPO_ROOT,
        env=environment,
        capture_output=True,
        text=True,
        check=False,
        timeout=COMMAND_TIMEOUT_S,
    )
    return time.perf_counter() - start, finished.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=2000, help="tasks")
    parser.add_argument("--concurrency", type=int, default=200)
    Pacing.add_arguments(parser)
    args = parser.parse_args()
    pacing = Pacing.of(args)
    ideal_per_s = args.concurrency / pacing.seconds
    with (
        tempfile.TemporaryDirectory(prefix="grove-bench-batch-") as name,
        quiet_config(),
        simulator_process(pacing) as simulator,
    ):
        directory = Path(name)
        tasks, context = write_inputs(directory, args.n)
        runner_out = directory / "runner.out.jsonl"
        runner_s = runner_seconds(simulator, tasks, runner_out, args.concurrency)
        runner_ok = ok_ids(runner_out)
        command_out = directory / "command.out.jsonl"
        command_s, command_exit = command_seconds(
            simulator, tasks, context, command_out, args.concurrency
        )
        command_ok = ok_ids(command_out)
        rerun_s, rerun_exit = command_seconds(
            simulator, tasks, context, command_out, args.concurrency
        )
        rerun_unchanged = ok_ids(command_out) == command_ok
        with ray_cluster(provider_env(simulator)) as cluster:
            cluster_out = directory / "cluster.out.jsonl"
            cluster_s, cluster_exit = command_seconds(
                simulator, tasks, context, cluster_out, args.concurrency, cluster
            )
            cluster_ok = ok_ids(cluster_out)
    runner_rate = args.n / runner_s
    report = {
        "bench": "batch",
        "n": args.n,
        "concurrency": args.concurrency,
        "simulator": pacing.as_dict(),
        "task_latency_s": round(pacing.seconds, 3),
        "ideal_tasks_per_s": round(ideal_per_s, 1),
        "runner_s": round(runner_s, 2),
        "runner_tasks_per_s": round(runner_rate, 1),
        "runner_of_ideal": round(runner_rate / ideal_per_s, 3),
        "runner_ok": len(runner_ok),
        "command_s": round(command_s, 2),
        "command_of_ideal": round(args.n / command_s / ideal_per_s, 3),
        "command_exit": command_exit,
        "command_ok": len(set(command_ok)),
        "rerun_s": round(rerun_s, 2),
        "rerun_exit": rerun_exit,
        "rerun_changed_nothing": rerun_unchanged,
        "on_cluster_s": round(cluster_s, 2),
        "on_cluster_of_ideal": round(args.n / cluster_s / ideal_per_s, 3),
        "on_cluster_exit": cluster_exit,
        "on_cluster_ok": len(set(cluster_ok)),
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
