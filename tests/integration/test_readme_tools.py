"""The README's "Tools" section, run as a reader would: its Python example and its two
commands, against the simulator, each printing what the section says it does.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

from tests.conformance.corpus import REPO_ROOT
from tests.integration.groves import cli_environment

TIMEOUT_S = 240


def tools_section() -> str:
    text = (REPO_ROOT / "README.md").read_text()
    return text.split("## Tools\n", 1)[1].split("\n## ", 1)[0]


def run(
    base: Path, command: list[str], cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command,
        cwd=cwd or base,
        env=cli_environment(base, base / "none.toml"),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )


def test_the_python_example_calls_the_tool(tmp_path: Path) -> None:
    (example,) = re.findall(r"```python\n(.+?)\n```", tools_section(), re.DOTALL)
    (tmp_path / "example.py").write_text(example)
    done = run(tmp_path, [sys.executable, "example.py"])
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['Oslo: sunny for 1 day(s)']"


def test_the_commands_call_the_tools_they_name(tmp_path: Path) -> None:
    (example,) = re.findall(r"```python\n(.+?)\n```", tools_section(), re.DOTALL)
    (tmp_path / "weather.py").write_text(example.split("\nwith Grove")[0])
    forecast, _, listing = re.findall(r"```bash\n(.+?)\n```", tools_section())
    grove = [sys.executable, "-m", "grove.cli.app"]
    done = run(tmp_path, grove + shlex.split(forecast)[1:])
    assert done.returncode == 0, done.stderr
    assert '→ forecast {"city": "Oslo"}' in done.stdout.splitlines()
    assert "← forecast: Oslo: sunny for 1 day(s)" in done.stdout.splitlines()
    done = run(tmp_path, grove + shlex.split(listing)[1:])
    assert done.returncode == 0, done.stderr
    assert "weather.py" in done.stdout and "← bash: exit code 0" in done.stdout


def test_the_mcp_example_calls_the_servers_tool(tmp_path: Path) -> None:
    (config,) = re.findall(r"```toml\n(.+?)\n```", tools_section(), re.DOTALL)
    command = re.findall(r"```bash\n(.+?)\n```", tools_section())[1]
    # As written: the venv's python, which a reader has without activating the venv.
    assert '".venv/bin/python"' in config and (REPO_ROOT / ".venv" / "bin" / "python").exists()
    (tmp_path / "none.toml").write_text(config)
    done = run(
        tmp_path, [sys.executable, "-m", "grove.cli.app", *shlex.split(command)[1:]], REPO_ROOT
    )
    assert done.returncode == 0, done.stderr
    assert "← mcp__calc__add: 5" in done.stdout.splitlines()
