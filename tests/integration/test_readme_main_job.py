"""The README's first command, the main job, run as written (offline, on the simulator): its 56
reviews all succeed and its summary reports what caching the shared review guide saved.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

from tests.integration.groves import cli_environment
from tests.unit.test_readme import readme_commands

MAIN_JOB_TIMEOUT_S = 300


def test_the_main_job_runs_offline_and_shows_what_caching_saved(tmp_path: Path) -> None:
    main_job = readme_commands()[0]
    grove_args = shlex.split(main_job.split(".venv/bin/grove ", 1)[1])
    output = tmp_path / "review.jsonl"
    at = grove_args.index("--output")
    grove_args[at + 1] = str(output)  # the README's /tmp file is a reader's, not the test's
    done = subprocess.run(
        [sys.executable, "-m", "grove.cli.app", *grove_args],
        cwd=Path(__file__).resolve().parents[2],
        env=cli_environment(tmp_path),
        capture_output=True,
        text=True,
        timeout=MAIN_JOB_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in output.read_text().splitlines()]
    assert len(records) == 56 and {record["status"] for record in records} == {"ok"}
    saved = re.search(r"\(caching saved \$(\d+\.\d+)\)", done.stdout)
    assert saved is not None, done.stdout
    assert float(saved.group(1)) > 0
    # The guide is most of each review's input: most of the input comes from the cache.
    share = re.search(r"\((\d+)% of input from cache\)", done.stdout)
    assert share is not None and int(share.group(1)) >= 80, done.stdout
    assert sum(record["saved_usd"] for record in records) > 0
