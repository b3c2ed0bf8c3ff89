"""Benchmark: the one-shot start of a Grove that starts Ray of its own (a fresh process: imports,
Ray, the supervisor and one host, one simulated reply, the end), with Ray started as Grove starts
it now (`LocalRay`: no autoscaler monitor or log monitor) against `ray.init` as Grove started it
before (same flags: no dashboard UI, no log forwarding), alternating, medians; also the
processes each way runs while the reply is being made.

Prints one JSON line. Run from the repository root: `python bench/ray_start.py --runs 5`.
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
from statistics import median
from typing import Any

from harness import REPO_ROOT

# One Grove, one reply; prints the processes below it (Ray's) once the reply is in.
DRIVER = """
import json, os, sys
mode = sys.argv[1]
from grove.supervisor.local_ray import keep_local_ray_on_loopback, prepare_local_ray
keep_local_ray_on_loopback(None)
import ray
from grove.supervisor.api import Grove
from grove.supervisor.actor import NAMESPACE
if mode == "ray.init":
    prepare_local_ray()
    ray.init(namespace=NAMESPACE, include_dashboard=False, log_to_driver=False,
             configure_logging=False)
sys.path.insert(0, "bench")
from harness import descendants
with Grove(simulate=True, hosts=1) as grove:
    root = grove.create_root("gpt-6.1-terra").uuid
    assert grove.ask(root, "hello").ok
    processes = len(descendants(os.getpid()))
if mode == "ray.init":
    ray.shutdown()
print(json.dumps({"processes": processes}))
"""
MODES = ("ray.init", "LocalRay")


def one_start(mode: str, env: dict[str, str]) -> tuple[float, int]:
    """Wall seconds of the whole process, and the processes below it at the reply."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, mode],
        env=env,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"ray_start bench: {mode} failed: {done.stderr[-2000:]}")
    return seconds, int(json.loads(done.stdout.splitlines()[-1])["processes"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5, help="alternating starts of each")
    args = parser.parse_args()
    walls: dict[str, list[float]] = {mode: [] for mode in MODES}
    processes: dict[str, int] = {}
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="grove-bench-ray-") as name:
        home = Path(name)
        env = {
            **os.environ,
            "PYTHONPATH": str(REPO_ROOT),
            "GROVE_CONFIG_FILE": str(home / "none.toml"),
            "GROVE_STORE": f"sqlite:///{home / 'grove.sqlite3'}",
            "XDG_CONFIG_HOME": str(home / "config"),
        }
        for run in range(args.runs):
            for mode in MODES if run % 2 == 0 else MODES[::-1]:
                seconds, count = one_start(mode, env)
                walls[mode].append(round(seconds, 2))
                processes[mode] = count
    full, lean = median(walls["ray.init"]), median(walls["LocalRay"])
    report: dict[str, Any] = {
        "bench": "ray_start",
        "runs": args.runs,
        "ray_init_s": round(full, 2),
        "local_ray_s": round(lean, 2),
        "ratio": round(lean / full, 3),
        "ray_init_processes": processes["ray.init"],
        "local_ray_processes": processes["LocalRay"],
        "load_average": [round(load_before, 1), round(os.getloadavg()[0], 1)],
        "walls": walls,
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
