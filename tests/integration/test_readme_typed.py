"""The README's "Typed results" section, run as a reader would: its Python example and its
commands print what the section says they do."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

from jsonschema import Draft202012Validator

from tests.integration.groves import cli_environment
from tests.integration.readme import EXAMPLE_TIMEOUT_S, readme_section, run_python_example


def test_the_python_example_prints_a_typed_answer(tmp_path: Path) -> None:
    done = run_python_example("Typed results", tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Finding True"
    assert "prints `Finding True`" in readme_section("Typed results")


def test_the_commands_print_the_checked_json(tmp_path: Path) -> None:
    """The section's two lines as written: the schema file, then `grove run` printing one line
    of JSON that the schema accepts."""
    (commands,) = re.findall(r"```bash\n(.+?)\n```", readme_section("Typed results"), re.DOTALL)
    write, run = commands.splitlines()
    env = cli_environment(tmp_path, tmp_path / "none.toml")
    made = subprocess.run(write, shell=True, cwd=tmp_path, env=env, check=False, timeout=10)
    assert made.returncode == 0
    schema = json.loads((tmp_path / "finding.json").read_text())
    done = subprocess.run(
        [sys.executable, "-m", "grove.cli.app", *shlex.split(run)[1:]],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=EXAMPLE_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    (line,) = done.stdout.splitlines()
    answer = json.loads(line)
    Draft202012Validator(schema).validate(answer)
    assert set(answer) == {"severity", "file", "line"}
