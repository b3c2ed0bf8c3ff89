"""What the README-running tests share: a section of README.md, and its Python example run
as a reader would (a file of its own, no user config, the simulator).
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from tests.conformance.corpus import REPO_ROOT
from tests.integration.groves import cli_environment

EXAMPLE_TIMEOUT_S = 240


def readme_section(title: str) -> str:
    """The text under `## {title}`, up to the next section."""
    text = (REPO_ROOT / "README.md").read_text()
    return text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def python_examples(title: str) -> list[str]:
    """The section's Python examples, in order."""
    return re.findall(r"```python\n(.+?)\n```", readme_section(title), re.DOTALL)


def run_python_example(
    title: str, base: Path, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The section's one Python example, run as `run_python` does."""
    (example,) = python_examples(title)
    return run_python(example, base, env)


def run_python(
    example: str, base: Path, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`example` written to `base` and run there (`env` added to the command line's
    environment)."""
    (base / "example.py").write_text(example)
    return subprocess.run(
        [sys.executable, "example.py"],
        cwd=base,
        env=cli_environment(base, base / "none.toml") | dict(env or {}),
        capture_output=True,
        text=True,
        timeout=EXAMPLE_TIMEOUT_S,
        check=False,
    )
