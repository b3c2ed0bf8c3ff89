"""Benchmark: what the sandbox and worktrees cost. `bash -c true` through the tools' one launch
path, sandboxed and not (p50 of 200 calls each, interleaved; goal: at most 20 ms more; with
the CPU time each call costs, and the machine's load, since waits grow with it); and
100 children forked into worktrees of a clone of this repository against 100 sharing its
directory: the time each worktree adds to the fork and to the children's turns, and its disk.

Prints one JSON line. Run from the repository root: `python bench/sandbox.py`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from harness import MODEL, REPO_ROOT, Pacing, percentile, running_grove, simulator_process

from grove.actors.tools.sandbox import SandboxPolicy
from grove.actors.tools.sandbox_run import run_process

GOAL_ADDED_MS = 20.0
WARMUP = 10


async def launch_latencies(root: Path, calls: int) -> dict[str, Any]:
    """Milliseconds of each `bash -c true`, sandboxed and not, one of each in turn; and the
    CPU time (user and system, of all the processes a call started) per call: what a call
    costs the machine, which waiting for a busy CPU does not change; and the CPU time of this
    process per call (the launch path's own work: the sandbox's arguments, the environment)."""
    policies = {"sandboxed": SandboxPolicy(), "unsandboxed": SandboxPolicy(mode="off")}
    samples: dict[str, list[float]] = {name: [] for name in policies}
    cpu = dict.fromkeys(policies, 0.0)
    launcher = dict.fromkeys(policies, 0.0)
    for index in range(WARMUP + calls):
        for name, policy in policies.items():
            before, own_before = children_cpu_s(), time.process_time()
            start = time.perf_counter()
            code = await run_process(["bash", "-c", "true"], root, policy, 30, lambda _: None)
            elapsed = (time.perf_counter() - start) * 1000
            if code != 0:
                raise SystemExit(f"sandbox bench: `bash -c true` exited {code} ({name})")
            if index >= WARMUP:
                samples[name].append(elapsed)
                cpu[name] += children_cpu_s() - before
                launcher[name] += time.process_time() - own_before
    return {
        "wall": samples,
        "cpu_ms": {name: cpu[name] * 1000 / calls for name in cpu},
        "launcher_cpu_ms": {name: launcher[name] * 1000 / calls for name in launcher},
    }


def children_cpu_s() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def disk_kb(path: Path) -> int:
    done = subprocess.run(["du", "-sk", str(path)], capture_output=True, text=True, check=True)
    return int(done.stdout.split()[0])


def fork_and_finish(grove: Any, root: str, n: int, workspace: str) -> tuple[float, float]:
    """Seconds until fork_many returned, and until every child's turn had ended."""
    start = time.perf_counter()
    children = grove.fork_many(root, [f"task {i}" for i in range(n)], workspace=workspace)
    forked = time.perf_counter() - start
    for child in children:
        result = grove.wait_turn(child, timeout_s=600)
        if result is None or not result.ok:
            raise SystemExit(f"sandbox bench: a {workspace} child failed: {result}")
    return forked, time.perf_counter() - start


def worktree_figures(children: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="grove-bench-repo-") as directory:
        clone = Path(directory) / "grove"
        subprocess.run(["git", "clone", "--quiet", str(REPO_ROOT), str(clone)], check=True)
        (clone / "README.md").write_text((clone / "README.md").read_text() + "\nnot committed\n")
        before = disk_kb(clone / ".git")
        pacing = Pacing(ttft_ms=50, tps=2000.0, tokens=20)
        previous = os.getcwd()
        os.chdir(clone)  # the hosts' workspace is where the Grove starts
        try:
            with simulator_process(pacing) as simulator, running_grove(simulator) as grove:
                root = grove.create_root(MODEL).uuid
                fork_and_finish(grove, root, 4, "worktree")  # warm-up: hosts, git's caches
                shared = fork_and_finish(grove, root, children, "shared")
                worktree = fork_and_finish(grove, root, children, "worktree")
        finally:
            os.chdir(previous)
        made = disk_kb(clone / ".git") - before
    return {
        "children": children,
        "files_in_repository": len(
            subprocess.run(
                ["git", "-C", str(REPO_ROOT), "ls-files"], capture_output=True, text=True
            ).stdout.splitlines()
        ),
        "shared_fork_s": round(shared[0], 3),
        "worktree_fork_s": round(worktree[0], 3),
        "fork_ms_per_worktree": round((worktree[0] - shared[0]) * 1000 / children, 1),
        "shared_all_answered_s": round(shared[1], 3),
        "worktree_all_answered_s": round(worktree[1], 3),
        "answered_ratio": round(worktree[1] / shared[1], 3),
        "disk_kb_per_worktree": round(made / children, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--children", type=int, default=100, help="0: no worktree figures")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="grove-bench-root-") as root:
        launched = asyncio.run(launch_latencies(Path(root), args.calls))
    samples, cpu, launcher = launched["wall"], launched["cpu_ms"], launched["launcher_cpu_ms"]
    sandboxed, unsandboxed = (percentile(samples[k], 0.5) for k in ("sandboxed", "unsandboxed"))
    figures: dict[str, Any] = {
        "bench": "sandbox",
        "calls": args.calls,
        "sandboxed_p50_ms": round(sandboxed, 2),
        "unsandboxed_p50_ms": round(unsandboxed, 2),
        "added_p50_ms": round(sandboxed - unsandboxed, 2),
        "ratio_p50": round(sandboxed / unsandboxed, 2),
        "sandboxed_cpu_ms_per_call": round(cpu["sandboxed"], 2),
        "unsandboxed_cpu_ms_per_call": round(cpu["unsandboxed"], 2),
        "sandboxed_launcher_cpu_ms_per_call": round(launcher["sandboxed"], 3),
        "unsandboxed_launcher_cpu_ms_per_call": round(launcher["unsandboxed"], 3),
        "load_average_1m": os.getloadavg()[0],
        "goal_added_ms": GOAL_ADDED_MS,
        "goal_met": sandboxed - unsandboxed <= GOAL_ADDED_MS,
    }
    if args.children:
        figures["worktrees"] = worktree_figures(args.children)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
