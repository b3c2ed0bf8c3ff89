"""The workspace tools that change things (actors/tools/editing.py): `write` and `edit` stay in
the workspace root and say precisely what went wrong; `bash` runs in the root without the
providers' keys, is cut at its timeout or when cancelled with everything it started, and its
output is capped head and tail, all without blocking the event loop.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import pytest

from grove.actors.agent.tool import Tool
from grove.actors.errors import ToolError
from grove.actors.tools.editing import BASH_OUTPUT_CHARS, MAX_WRITE_BYTES, editing_tools
from grove.actors.tools.sandbox import SandboxPolicy, command_environment
from tests.unit.loop_checks import all_gone, appears, with_ticks


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("x = 1\ny = 1\nprint(x)\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("do not touch")
    (root / "link-out").symlink_to(outside)
    (root / "file-out").symlink_to(outside / "secret.txt")
    return root


@pytest.fixture
def tools(root: Path) -> dict[str, Tool]:
    return editing_tools(root)


async def run(tools: dict[str, Tool], name: str, **arguments: Any) -> str:
    output = await tools[name].run(arguments)
    assert isinstance(output, str)
    return output


async def refused(tools: dict[str, Tool], name: str, **arguments: Any) -> str:
    with pytest.raises(ToolError) as caught:
        await tools[name].run(arguments)
    return str(caught.value)


async def test_write_creates_and_replaces_inside_the_root(
    root: Path, tools: dict[str, Tool]
) -> None:
    assert await run(tools, "write", path="new/deep/notes.md", content="hi") == (
        "created new/deep/notes.md (2 bytes)"
    )
    assert (root / "new/deep/notes.md").read_text() == "hi"
    assert (
        await run(tools, "write", path="src/app.py", content="") == "replaced src/app.py (0 bytes)"
    )
    assert (root / "src/app.py").read_text() == ""
    assert sorted(path.name for path in (root / "src").iterdir()) == ["app.py"]  # no temp left


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("../outside/secret.txt", "path escapes the workspace"),
        ("/etc/passwd", "absolute path outside the workspace"),
        ("link-out/secret.txt", "leads outside the workspace through a symlink"),
        ("link-out/new.txt", "leads outside the workspace through a symlink"),
        ("file-out", "leads outside the workspace through a symlink"),
        ("a\0b", "NUL byte"),
    ],
)
async def test_writes_and_edits_never_leave_the_root(
    root: Path, tools: dict[str, Tool], path: str, reason: str
) -> None:
    assert reason in await refused(tools, "write", path=path, content="pwned")
    assert reason in await refused(tools, "edit", path=path, old="do", new="pwned")
    assert (root.parent / "outside" / "secret.txt").read_text() == "do not touch"
    assert not (root.parent / "outside" / "new.txt").exists()


async def test_write_refuses_too_much_content(tools: dict[str, Tool]) -> None:
    text = await refused(tools, "write", path="big.txt", content="x" * (MAX_WRITE_BYTES + 1))
    assert (
        text == f"content is {MAX_WRITE_BYTES + 1:,} bytes; write takes at most {MAX_WRITE_BYTES:,}"
    )


async def test_edit_replaces_exact_text_with_clear_errors(
    root: Path, tools: dict[str, Tool]
) -> None:
    assert await run(tools, "edit", path="src/app.py", old="print(x)", new="print(y)") == (
        "edited src/app.py: 1 replacement"
    )
    assert await refused(tools, "edit", path="src/app.py", old="z = 3", new="") == (
        "`old` was not found in src/app.py; read the file again and copy the text exactly"
    )
    assert await refused(tools, "edit", path="src/app.py", old=" = 1", new=" = 2") == (
        "`old` occurs 2 times in src/app.py; add surrounding text to make it unique, "
        "or pass count=2 to replace them all"
    )
    assert await refused(tools, "edit", path="src/app.py", old=" = 1", new="", count=3) == (
        "`old` occurs 2 times in src/app.py, not 3"
    )
    assert await run(tools, "edit", path="src/app.py", old=" = 1", new=" = 2", count=2) == (
        "edited src/app.py: 2 replacements"
    )
    assert (root / "src/app.py").read_text() == "x = 2\ny = 2\nprint(y)\n"
    assert await refused(tools, "edit", path="src/app.py", old="", new="a") == (
        "`old` is empty: name the exact text to replace"
    )
    assert await refused(tools, "edit", path="nope.py", old="a", new="b") == "no such file: nope.py"


async def test_bash_runs_in_the_root_without_provider_keys(
    root: Path, tools: dict[str, Tool], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-canary")
    monkeypatch.setenv("MY_SERVICE_TOKEN", "canary-token")
    monkeypatch.setenv("LANG", "C.UTF-8")
    output = await run(tools, "bash", command="pwd; env; echo done >&2; exit 3")
    assert output.startswith("exit code 3\n")
    assert str(root) in output and "LANG=C.UTF-8" in output and "done" in output
    assert "canary" not in output


@pytest.mark.parametrize("mode", ["workspace-write", "off"])
async def test_a_timeout_kills_the_command_and_what_it_started(root: Path, mode: str) -> None:
    tools = editing_tools(root, SandboxPolicy(mode=mode))  # type: ignore[arg-type]
    marker = f"{time.time_ns() % 10**6}.5"  # sleep's argument, for finding it from here
    started = time.monotonic()
    text = await refused(
        tools, "bash", command=f"sleep {marker} & sleep {marker}; echo never", timeout_s=1.5
    )
    assert text == "Command timed out after 1.5 s; it and its children were killed"
    assert time.monotonic() - started < 10
    assert await all_gone(marker)


@pytest.mark.parametrize("mode", ["workspace-write", "off"])
async def test_cancelling_the_turn_kills_the_command_group(root: Path, mode: str) -> None:
    tools = editing_tools(root, SandboxPolicy(mode=mode))  # type: ignore[arg-type]
    marker = f"{time.time_ns() % 10**6}.25"
    running = asyncio.create_task(
        run(tools, "bash", command=f"sleep {marker} & sleep {marker}; echo never")
    )
    assert await appears(marker)
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    assert await all_gone(marker)


async def test_bash_output_is_capped_and_the_loop_keeps_running(tools: dict[str, Tool]) -> None:
    command = "sleep 0.5; head -c 100000 /dev/zero | tr '\\0' a; echo; echo THE-END"
    output, ticks = await with_ticks(run(tools, "bash", command=command))
    assert ticks >= 5
    assert len(output) < BASH_OUTPUT_CHARS + 200
    assert "characters cut" in output and output.rstrip().endswith("THE-END")


@pytest.mark.parametrize("limit", [0, -1, 601, float("nan"), float("inf")])
async def test_bash_timeouts_must_be_bounded(tools: dict[str, Tool], limit: float) -> None:
    text = await refused(tools, "bash", command="true", timeout_s=limit)
    assert "timeout_s" in text


def test_the_command_environment_is_an_allowlist(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process gets PATH, HOME, the locale and a few more, and what the policy names: not a
    provider's key (even named), nor a token in a variable of a name Grove never heard of, nor
    an OTLP exporter's headers (`authorization=Bearer ...`)."""
    hidden = {
        "GEMINI_API_KEY": "x",
        "GITHUB_PAT": "ghp_" + "A" * 36,
        "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20sk-collector",
        "GROVE_TELEMETRY__HEADERS": "authorization=Bearer%20sk-collector",
        "OTEL_SERVICE_NAME": "unnamed",
    }
    for name, value in {**hidden, "LC_TIME": "C", "PROJECT_FLAG": "on"}.items():
        monkeypatch.setenv(name, value)
    environment = command_environment(SandboxPolicy())
    assert environment["PATH"] == os.environ["PATH"] and environment["LC_TIME"] == "C"
    assert not {*hidden, "PROJECT_FLAG"} & set(environment)
    named = command_environment(SandboxPolicy(env=("PROJECT_FLAG", "GEMINI_API_KEY")))
    assert named["PROJECT_FLAG"] == "on" and "GEMINI_API_KEY" not in named


def test_package_registry_and_database_credentials_are_among_the_hidden(tmp_path: Path) -> None:
    """Tokens of package registries and database passwords live in the home directory too."""
    from grove.actors.tools.sandbox import secret_paths

    names = (".npmrc", ".pypirc", ".pgpass", ".cargo/credentials.toml", ".gem/credentials")
    for name in names:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("token\n")
    hidden = secret_paths(SandboxPolicy(), {"HOME": str(tmp_path)})
    assert {tmp_path / name for name in names} <= set(hidden)
