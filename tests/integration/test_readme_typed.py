"""The README's "Typed results" section, run as a reader would: its Python example prints what
the section says it does."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.conformance.corpus import REPO_ROOT
from tests.integration.groves import cli_environment

TIMEOUT_S = 240


def typed_section() -> str:
    text = (REPO_ROOT / "README.md").read_text()
    return text.split("## Typed results\n", 1)[1].split("\n## ", 1)[0]


def test_the_python_example_prints_a_typed_answer(tmp_path: Path) -> None:
    (example,) = re.findall(r"```python\n(.+?)\n```", typed_section(), re.DOTALL)
    (tmp_path / "example.py").write_text(example)
    done = subprocess.run(
        [sys.executable, "example.py"],
        cwd=tmp_path,
        env=cli_environment(tmp_path, tmp_path / "none.toml"),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Finding True"
    assert "prints `Finding True`" in typed_section()
