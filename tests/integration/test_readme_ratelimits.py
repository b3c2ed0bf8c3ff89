"""The README's "Rate limits" section, run as a reader would: its configuration given to
`grove batch` against a simulator enforcing the same limits, 64 tasks at 40 at a time, and not
one answer is a 429."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

from grove.simulator import SimulatorConfig, SimulatorThread
from tests.conformance.corpus import REPO_ROOT
from tests.integration.groves import cli_environment

KEY = "sim-readme-limits-7c1d"
TASKS = 64  # the bucket holds 57: the last few wait for its refill (a second each)


def test_the_rate_limit_example_keeps_a_batch_under_the_limits(tmp_path: Path) -> None:
    section = (REPO_ROOT / "README.md").read_text().split("## Rate limits\n", 1)[1]
    (example,) = re.findall(r"```toml\n(.+?)\n```", section.split("\n## ", 1)[0], re.DOTALL)
    limits = tomllib.loads(example)["providers"]["anthropic"]
    config = tmp_path / "config.toml"
    config.write_text(example + "\n")
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        "".join(json.dumps({"id": n, "prompt": f"task {n}"}) + "\n" for n in range(TASKS))
    )
    output = tmp_path / "out.jsonl"
    simulator_config = SimulatorConfig(api_key=KEY, rpm=limits["rpm"], tpm=limits["tpm"], tokens=3)
    with SimulatorThread(simulator_config) as simulator:
        env = cli_environment(tmp_path, config)
        env.update(ANTHROPIC_BASE_URL=simulator.base_url, ANTHROPIC_API_KEY=KEY)
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "grove.cli.app",
                "batch",
                str(tasks),
                "--model",
                "claude-haiku-4-5",
                "--concurrency",
                "40",
                "--output",
                str(output),
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
            check=False,
        )
        refused = simulator.simulator.rate_limited
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in output.read_text().splitlines()]
    assert len(records) == TASKS and all(r["status"] == "ok" for r in records)
    assert refused == 0  # more tasks than the bucket holds, and the rest waited their turn
