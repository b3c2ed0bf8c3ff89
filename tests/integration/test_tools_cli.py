"""Tools from the command line: `--tools package.module:attr` (found in the current directory),
`[tools] modules` in the config, `--allow`, and the calls and results in `grove run --json`.

The commands that run turns run in this process on the module's Grove (started once; a command
finds Ray started and joins its supervisor, as in test_one_path.py): the tools, the policy and
the config are the command's own, sent with each root it makes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from grove.supervisor import Grove
from tests.integration.groves import Invoked, cli_environment, invoke

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
        [sys.executable, "-m", "grove.cli.app", *args],
        cwd=base,
        capture_output=True,
        text=True,
        env=env,
        timeout=TIMEOUT_S,
        check=False,
    )


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the commands run: the tool module `voice` in the current directory."""
    base = tmp_path_factory.mktemp("work")
    (base / "voice.py").write_text(TOOLS_FILE)
    return base


@pytest.fixture
def joined(
    grove: Grove, store_url: str, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> dict[str, str]:
    """The environment of a command in `workdir` on the module's Grove and store."""
    monkeypatch.chdir(workdir)
    return {**cli_environment(workdir), "GROVE_STORE": store_url}


def with_config(env: dict[str, str], *args: str, config: str = "") -> Invoked:
    """`grove ARGS` in this process, with `config` as its config file."""
    Path(env["GROVE_CONFIG_FILE"]).write_text(config)
    return invoke(env, *args)


def directive(tool: str, **arguments: object) -> str:
    return f"[[sim tool={tool} args='{json.dumps(arguments)}' step=1]] go"


def test_run_takes_tools_from_the_current_directory_and_the_config(
    joined: dict[str, str],
) -> None:
    run = ("run", "--simulate", "--model", "gpt-5-mini", "--json")
    done = with_config(joined, *run, "--tools", "voice:shout", directive("shout", text="hi"))
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert [c["name"] for c in result["tool_calls"]] == ["shout"]
    assert [(r["content"], r["is_error"]) for r in result["tool_results"]] == [("HI!", False)]
    configured = '[tools]\nmodules = ["voice:whisper"]\n'
    done = with_config(joined, *run, directive("whisper", text="HI"), config=configured)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["tool_results"][0]["content"] == "hi..."


def test_run_roots_have_the_default_tools_and_bash_needs_allow(joined: dict[str, str]) -> None:
    run = ("run", "--simulate", "--model", "gpt-5-mini", "--json", "--tools", "bash")
    command = directive("bash", command="echo ran")
    refused = json.loads(with_config(joined, *run, command).stdout)["tool_results"][0]
    assert refused["is_error"] and "--allow bash" in refused["content"]
    allowed = json.loads(with_config(joined, *run, "--allow", "bash", command).stdout)
    assert allowed["tool_results"][0]["content"] == "exit code 0\nran\n"
    todo = directive("todo", ops=[{"op": "append", "phase": "P", "items": ["a"]}])
    listed = json.loads(with_config(joined, *run[:5], todo).stdout)
    assert listed["tool_results"][0]["content"].startswith("Remaining: 1 of 1 tasks")


def test_a_bad_tool_spec_is_exit_2_with_the_reason(tmp_path: Path) -> None:
    done = grove(tmp_path, "run", "--simulate", "--model", "gpt-5-mini", "--tools", "nope:x", "hi")
    assert done.returncode == 2
    assert "tool spec 'nope:x': cannot import nope" in done.stderr
    assert "Traceback" not in done.stderr


def test_each_call_and_result_is_one_line_in_the_stream(joined: dict[str, str]) -> None:
    run = ("run", "--simulate", "--model", "gpt-5-mini", "--tools", "voice:shout")
    done = with_config(joined, *run, directive("shout", text="hi"))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert '→ shout {"text": "hi"}' in lines
    assert "← shout: HI!" in lines


def test_todo_edit_round_trips_the_list_through_the_editor(
    joined: dict[str, str], tmp_path: Path
) -> None:
    editor = tmp_path / "editor.sh"
    # An "editor" that marks the first task done and adds one, as a person would.
    editor.write_text(
        '#!/bin/sh\nsed -i "s/- \\[\\/\\] parse/- [x] parse/" "$1"\necho "- [ ] ship it" >> "$1"\n'
    )
    editor.chmod(0o755)
    plan = [{"op": "init", "list": [{"phase": "Build", "items": ["parse", "store"]}]}]
    env = {**joined, "EDITOR": str(editor)}

    def chat(*args: str, script: str) -> Invoked:
        return invoke(env, "chat", "--simulate", *args, stdin=script)

    Path(env["GROVE_CONFIG_FILE"]).write_text("")
    first = chat("--model", "gpt-5-mini", script=directive("todo", ops=plan) + "\n")
    root = first.stdout.split()[1]  # "Agent UUID"
    done = chat("--resume", root, script="/todo edit\n/todo\n")
    assert done.returncode == 0, done.stdout + done.stderr
    expected = "# Build\n- [x] parse\n- [/] store\n- [ ] ship it"
    assert done.stdout.count(expected) == 2  # what /todo edit read back, and /todo after it


def test_batch_records_hold_the_tool_calls_and_results(
    joined: dict[str, str], tmp_path: Path
) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": 1, "prompt": directive("shout", text="hi")}) + "\n")
    out = tmp_path / "out.jsonl"
    batch = ("batch", str(tasks), "--simulate", "--model", "gpt-5-mini", "--output", str(out))
    done = with_config(joined, *batch, "--tools", "voice:shout")
    assert done.returncode == 0, done.stderr
    (record,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert [c["name"] for c in record["tool_calls"]] == ["shout"]
    assert [r["content"] for r in record["tool_results"]] == ["HI!"]
