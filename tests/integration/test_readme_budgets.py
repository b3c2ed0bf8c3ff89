"""The README's "Budgets and usage" section, run as a reader would: its Python example's second
request would pass the token budget, so it is not sent, and the reference text is printed."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.conformance.corpus import REPO_ROOT
from tests.integration.groves import cli_environment


def test_the_budget_example_stops_at_its_limit(tmp_path: Path) -> None:
    section = (REPO_ROOT / "README.md").read_text().split("## Budgets and usage\n", 1)[1]
    (example,) = re.findall(r"```python\n(.+?)\n```", section.split("\n## ", 1)[0], re.DOTALL)
    (tmp_path / "example.py").write_text(example)
    done = subprocess.run(
        [sys.executable, "example.py"], cwd=tmp_path, capture_output=True, text=True,
        env=cli_environment(tmp_path, tmp_path / "none.toml"), timeout=240, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert re.fullmatch(r"Budget exhausted: tokens \d+/300\n", done.stdout), done.stdout
