"""The README's "Async" section, run as a reader would: its first example prints what the
section says; its second (on a running service) is run by test_async_grove.py's service test."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.conformance.corpus import REPO_ROOT
from tests.integration.groves import cli_environment

TIMEOUT_S = 240


def async_section() -> str:
    text = (REPO_ROOT / "README.md").read_text()
    return text.split("## Async\n", 1)[1].split("\n## ", 1)[0]


def async_examples() -> list[str]:
    """The section's examples: on a Grove of its own, and on a running service."""
    return re.findall(r"```python\n(.+?)\n```", async_section(), re.DOTALL)


def run_example(example: str, base: Path, env: dict[str, str]) -> str:
    (base / "example.py").write_text(example)
    done = subprocess.run(
        [sys.executable, "example.py"],
        cwd=base,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_example_prints_what_the_section_says(tmp_path: Path) -> None:
    local, _service = async_examples()
    printed = run_example(local, tmp_path, cli_environment(tmp_path, tmp_path / "none.toml"))
    assert printed == "3 answers\nstreamed: True\n"
    assert "prints `3 answers` and `streamed: True`" in async_section()
