"""Tools from the command line: `--tools package.module:attr` (found in the current directory),
`[tools] modules` in the config, `--allow`, and the calls and results in `grove run --json`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.integration.groves import cli_environment

TIMEOUT_S = 240
TOOLS_FILE = '''
def shout(text: str) -> str:
    """Say it louder."""
    return text.upper() + "!"


def whisper(text: str) -> str:
    """Say it softly."""
    return text.lower() + "..."
'''


def grove(base: Path, *args: str, config: str = "") -> subprocess.CompletedProcess[str]:
    (base / "config.toml").write_text(config)
    env = cli_environment(base)
    return subprocess.run(
        [sys.executable, "-m", "cli.app", *args],
        cwd=base,
        capture_output=True,
        text=True,
        env=env,
        timeout=TIMEOUT_S,
        check=False,
    )


def directive(tool: str, **arguments: object) -> str:
    return f"[[sim tool={tool} args='{json.dumps(arguments)}' step=1]] go"


def test_run_takes_tools_from_the_current_directory_and_the_config(tmp_path: Path) -> None:
    (tmp_path / "voice.py").write_text(TOOLS_FILE)
    run = ("run", "--simulate", "--model", "gpt-5-mini", "--json")
    done = grove(tmp_path, *run, "--tools", "voice:shout", directive("shout", text="hi"))
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert [c["name"] for c in result["tool_calls"]] == ["shout"]
    assert [(r["content"], r["is_error"]) for r in result["tool_results"]] == [("HI!", False)]
    configured = '[tools]\nmodules = ["voice:whisper"]\n'
    done = grove(tmp_path, *run, directive("whisper", text="HI"), config=configured)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["tool_results"][0]["content"] == "hi..."


def test_run_roots_have_the_default_tools_and_bash_needs_allow(tmp_path: Path) -> None:
    run = ("run", "--simulate", "--model", "gpt-5-mini", "--json", "--tools", "bash")
    command = directive("bash", command="echo ran")
    refused = json.loads(grove(tmp_path, *run, command).stdout)["tool_results"][0]
    assert refused["is_error"] and "--allow bash" in refused["content"]
    allowed = json.loads(grove(tmp_path, *run, "--allow", "bash", command).stdout)
    assert allowed["tool_results"][0]["content"] == "exit code 0\nran\n"
    todo = directive("todo", ops=[{"op": "append", "phase": "P", "items": ["a"]}])
    listed = json.loads(grove(tmp_path, *run[:5], todo).stdout)
    assert listed["tool_results"][0]["content"].startswith("Remaining: 1 of 1 tasks")


def test_a_bad_tool_spec_is_exit_2_with_the_reason(tmp_path: Path) -> None:
    done = grove(tmp_path, "run", "--simulate", "--model", "gpt-5-mini", "--tools", "nope:x", "hi")
    assert done.returncode == 2
    assert "tool spec 'nope:x': cannot import nope" in done.stderr
    assert "Traceback" not in done.stderr


def test_each_call_and_result_is_one_line_in_the_stream(tmp_path: Path) -> None:
    (tmp_path / "voice.py").write_text(TOOLS_FILE)
    run = ("run", "--simulate", "--model", "gpt-5-mini", "--tools", "voice:shout")
    done = grove(tmp_path, *run, directive("shout", text="hi"))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert '→ shout {"text": "hi"}' in lines
    assert "← shout: HI!" in lines
