"""What run, chat and batch check before anything starts (cli/preflight.py), run as a user runs
`grove`: a typo of a known model, a missing key, --tools that cannot be imported, an MCP server
that cannot start, unusable files and budgets are one message and exit 2 with Ray never even
imported (the commands run with Python's import log on), and so is a retired model, naming its
successor; a deprecated model warns once and runs.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from grove.providers.credentials import API_KEY_ENV, missing_credentials_text
from grove.supervisor.tool_rules import unknown_tool_text
from tests.integration.groves import running_grove
from tests.integration.services import service_in_process
from tests.security.commands import Place, make_place

WEATHER = '''
def forecast(city: str) -> str:
    """The forecast for a city."""
    return f"sunny in {city}"


NOT_A_FUNCTION = 42
'''
IMPORT_LOG = "import time:"


@pytest.fixture
def place(tmp_path: Path) -> Iterator[Place]:
    (tmp_path / "weather.py").write_text(WEATHER)
    (tmp_path / "tasks.jsonl").write_text('{"id": "a", "prompt": "hi"}\n')
    yield from make_place(tmp_path)


def refused(place: Place, *args: str, **env: str) -> str:
    """`grove ARGS` in the place's directory: exit 2 before Ray, without importing it; what it
    printed on stderr (Python's import log taken out)."""
    done = subprocess.run(
        [*grove_command(), *args],
        capture_output=True,
        text=True,
        cwd=place.base,
        input="",
        env={**place.env, "PYTHONPROFILEIMPORTTIME": "1", **env},
        timeout=120,
        check=False,
    )
    lines = done.stderr.splitlines()
    imported = [line.rpartition("|")[2].strip() for line in lines if line.startswith(IMPORT_LOG)]
    said = "\n".join(line for line in lines if not line.startswith(IMPORT_LOG))
    assert done.returncode == 2, (args, said)
    assert done.stdout == "", args
    assert "Traceback" not in said, said
    assert "grove.cli.context" in imported  # the import log is on
    assert not [name for name in imported if name.partition(".")[0] == "ray"], args
    assert not place.ray_started()
    return said


def grove_command() -> list[str]:
    import sys

    return [sys.executable, "-m", "grove.cli.app"]


def each_command(place: Place, *flags: str) -> list[tuple[str, ...]]:
    """run, chat and batch with `flags` (a model of their own where none is given)."""
    model = () if "--model" in flags else ("--model", "gpt-6.1-terra")
    return [
        ("run", *model, *flags, "hi"),
        ("chat", *model, *flags),
        ("batch", str(place.base / "tasks.jsonl"), *model, *flags),
    ]


@pytest.mark.parametrize(
    ("model", "line"),
    [
        (
            "claude-sonet-5-5",
            "Unknown model: claude-sonet-5-5. Did you mean claude-sonnet-5-5? (To send "
            "claude-sonet-5-5 as written, name it anthropic:claude-sonet-5-5.)",
        ),
        (
            "gpt-6-lun/low",
            "Unknown model: gpt-6-lun. Did you mean gpt-6-luna? (To send gpt-6-lun as "
            "written, name it openai:gpt-6-lun.)",
        ),
        (
            "claude-sonnet-4-5/med",
            "claude-sonnet-4-5 was retired on 2026-11-30; use claude-sonnet-5-5",
        ),
    ],
)
def test_a_typo_or_a_retired_model_is_one_line(place: Place, model: str, line: str) -> None:
    for args in each_command(place, "--model", model, "--simulate"):
        assert refused(place, *args) == line, args


def test_a_typo_in_a_task_or_the_advisor_is_refused_before_any_task_runs(place: Place) -> None:
    tasks = place.base / "typo.jsonl"
    tasks.write_text('{"id": "a", "prompt": "hi", "model": "gemini-3.8-flsh"}\n')
    said = refused(place, "batch", str(tasks), "--simulate")
    assert said.endswith("Did you mean gemini-3.8-flash? (To send gemini-3.8-flsh as written, "
                         "name it google:gemini-3.8-flsh.)")  # fmt: skip
    assert not (place.base / "typo.out.jsonl").exists()
    tasks.write_text('{"id": "a", "prompt": "hi", "model": "claude-sonnet-4-5/low"}\n')
    said = refused(place, "batch", str(tasks), "--simulate", "--model", "claude-sonnet-5-5")
    assert said == "claude-sonnet-4-5 was retired on 2026-11-30; use claude-sonnet-5-5"
    assert not (place.base / "typo.out.jsonl").exists()
    said = refused(
        place, "batch", str(place.base / "tasks.jsonl"), "--model", "gpt-6.1-terra",
        "--advisor", "claude-hiaku-5-5",
    )  # fmt: skip
    assert "Did you mean claude-haiku-5-5?" in said
    said = refused(
        place, "batch", str(place.base / "tasks.jsonl"), "--model", "gpt-6.1-terra",
        "--advisor", "gemini-2.5-pro/high", "--simulate",
    )  # fmt: skip
    assert said == "gemini-2.5-pro was retired on 2026-12-01; use gemini-3.8-flash"


def test_a_retired_model_in_the_config_file_is_one_line_before_ray(place: Place) -> None:
    config = Path(place.env["GROVE_CONFIG_FILE"])
    for text, key in (
        ('[defaults]\nmodel = "claude-sonnet-4-5"\n', "defaults.model"),
        ('[advisor]\nenabled = true\nmodel = "claude-sonnet-4-5/med"\n', "advisor.model"),
    ):
        config.write_text(text)
        said = refused(place, "run", "--simulate", "--model", "claude-sonnet-5-5", "hi")
        assert said == (
            f"invalid configuration ({config} or GROVE_* variables): {key}: Value error, "
            "claude-sonnet-4-5 was retired on 2026-11-30; use claude-sonnet-5-5"
        )
        assert config.read_text() == text


@pytest.mark.parametrize(
    ("model", "provider"),
    [
        ("claude-haiku-5-5", "anthropic"),
        ("gpt-6.1-terra", "openai"),
        ("gemini-3.8-flash", "google"),
    ],
)
def test_a_provider_without_a_key_is_refused_before_ray(
    place: Place, model: str, provider: str
) -> None:
    commands = each_command(place, "--model", model)
    for args in commands if provider == "anthropic" else commands[:1]:
        assert refused(place, *args) == missing_credentials_text(provider), args  # type: ignore[arg-type]


def test_a_key_from_the_environment_or_the_credentials_file_passes(place: Place) -> None:
    """With the key there the check passes, and the next one (the tools) speaks."""
    unknown = unknown_tool_text("nosuch")
    key = {"OPENAI_API_KEY": "sk-not-used"}
    assert refused(place, "run", "--model", "gpt-6.1-terra", "--tools", "nosuch", "hi", **key) == (
        unknown
    )
    credentials = place.base / "config" / "grove" / "credentials.json"
    credentials.parent.mkdir(parents=True, exist_ok=True)
    credentials.write_text(json.dumps({"google": {"api_key": "not-used"}}))
    credentials.chmod(0o600)
    said = refused(place, "run", "--model", "gemini-3.8-flash", "--tools", "nosuch", "hi")
    assert said == unknown


@pytest.mark.parametrize(
    ("tool", "line"),
    [
        (
            "nosuchmodule:fn",
            "tool spec 'nosuchmodule:fn': cannot import nosuchmodule: No module named "
            "'nosuchmodule'",
        ),
        ("weather:nosuchfn", "tool spec 'weather:nosuchfn': weather has no nosuchfn"),
        ("weather:NOT_A_FUNCTION", "tool spec 'weather:NOT_A_FUNCTION': 42 is not a function"),
        ("weather", unknown_tool_text("weather")),
    ],
)
def test_tools_that_cannot_be_had_are_refused_before_ray(
    place: Place, tool: str, line: str
) -> None:
    commands = each_command(place, "--simulate", "--tools", tool)
    for args in commands if tool.startswith("nosuchmodule") else commands[:1]:
        assert refused(place, *args) == line, args


def test_an_mcp_server_whose_command_is_missing_is_refused_before_ray(place: Place) -> None:
    Path(place.env["GROVE_CONFIG_FILE"]).write_text(
        '[mcp.servers.calc]\ncommand = "no-such-mcp-server"\n\n'
        '[mcp.servers.local]\ncommand = "./servers/calc.py"\n\n'
        '[mcp.servers.off]\ncommand = "also-missing"\nenabled = false\n'
    )
    for args in each_command(place, "--simulate"):
        assert refused(place, *args) == (
            "MCP server calc: command 'no-such-mcp-server' is not on PATH; fix "
            "[mcp.servers.calc] command (a full path) or set enabled = false"
        ), args
    Path(place.env["GROVE_CONFIG_FILE"]).write_text(
        '[mcp.servers.local]\ncommand = "./servers/calc.py"\n'
    )
    assert refused(place, "run", "--simulate", "--model", "gpt-6.1-terra", "hi") == (
        "MCP server local: command './servers/calc.py' is not an executable file; fix "
        "[mcp.servers.local] command or set enabled = false"
    )


def test_files_that_cannot_be_used_are_refused_before_ray(place: Place) -> None:
    tasks = str(place.base / "tasks.jsonl")
    batch = ("batch", tasks, "--simulate", "--model", "gpt-6.1-terra")
    assert refused(place, "batch", "nosuch.jsonl", *batch[2:]) == (
        "cannot read nosuch.jsonl: No such file or directory"
    )
    assert refused(place, *batch, "--context", "nosuch.md") == (
        "cannot read nosuch.md: No such file or directory"
    )
    assert refused(place, *batch, "--output", str(place.base)) == (
        f"cannot write the output {place.base}: it is not a file; name another with --output"
    )
    assert refused(place, *batch, "--output", f"{tasks}/out.jsonl") == (
        f"cannot write the output {tasks}/out.jsonl: {tasks} is not a directory; name another "
        "with --output"
    )
    # Checks pass for a root (who may write anything), the kernel refuses: still one line.
    kernel_file = refused(place, *batch, "--output", "/proc/version").splitlines()[-1]
    assert kernel_file.startswith("cannot write the output /proc/version: "), kernel_file
    assert kernel_file.endswith("; name another with --output"), kernel_file


def test_budgets_that_cannot_be_kept_are_refused_before_ray(place: Place) -> None:
    unpriced = (
        "{} cannot be kept: my-local-model has no price in the catalog; set one in "
        "[models.prices] or use a token budget"
    )
    commands = each_command(place, "--simulate", "--model", "openai:my-local-model")
    for args in commands:
        assert refused(place, *args, "--budget-cost", "1") == unpriced.format("--budget-cost")
    assert refused(place, *commands[0], "--budget-time", "soon") == (
        "--budget-time: use seconds or a number with s, m or h; got 'soon'"
    )
    assert refused(place, *commands[0], "--budget-tokens", "0") == (
        "budget tokens must be a positive number, got 0"
    )
    Path(place.env["GROVE_CONFIG_FILE"]).write_text("[budget]\ncost_usd = 2.0\n")
    args = ("run", "--simulate", "--model", "openai:my-local-model", "hi")
    assert refused(place, *args) == unpriced.format("[budget] cost_usd")
    Path(place.env["GROVE_CONFIG_FILE"]).write_text(
        '[budget]\ncost_usd = 2.0\n\n[models.prices]\n"my-local-model" = [1.0, 2.0]\n'
        '\n[mcp.servers.calc]\ncommand = "no-such-mcp-server"\n'
    )
    assert refused(place, *args).startswith("MCP server calc:")  # priced: the budget passed


def test_through_a_service_the_same_checks_speak_the_same_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A service on real providers (no keys where it runs): the command line asks it what it
    has, and refuses as a Grove of its own would, before anything is made."""
    (tmp_path / "weather.py").write_text(WEATHER)
    key = {"OPENAI_API_KEY": "sk-not-used"}  # the service's and the command line's
    # The service's API is served over a Grove of this process: what it has is what this
    # process's environment and config directory hold, the one key alone.
    for name in [name for names in API_KEY_ENV.values() for name in names]:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", key["OPENAI_API_KEY"])
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    with (
        running_grove(tmp_path, hosts=1, simulate=False) as grove,
        service_in_process(grove, tmp_path, key) as service,
    ):
        for args, line in (
            (("run", "--model", "claude-haiku-5-5", "hi"), missing_credentials_text("anthropic")),
            (("run", "--model", "claude-sonet-5-5", "hi"), "Unknown model: claude-sonet-5-5."),
            (
                ("run", "--model", "claude-sonnet-4-5", "hi"),
                "claude-sonnet-4-5 was retired on 2026-11-30; use claude-sonnet-5-5",
            ),
            (
                ("batch", "tasks.jsonl", "--model", "gpt-6.1-terra", "--tools", "weather:nosuchfn"),
                "tool spec 'weather:nosuchfn': weather has no nosuchfn",
            ),
        ):
            (tmp_path / "tasks.jsonl").write_text('{"id": "a", "prompt": "hi"}\n')
            done = service.grove(*args, cwd=tmp_path, stdin="")
            assert done.returncode == 2, (args, done.stderr)
            assert done.stderr.strip().startswith(line) or line in done.stderr, done.stderr
        with service.api() as api:
            assert api.get("/api/agents").json()["agents"] == []  # nothing was made


def test_a_deprecated_model_warns_once_with_its_shutdown_and_still_runs(place: Place) -> None:
    tasks = place.base / "three.jsonl"
    lines = [f'{{"id": {n}, "prompt": "task {n}"}}\n' for n in range(2)]
    lines.append('{"id": 2, "prompt": "task 2", "model": "gpt-5-mini/high"}\n')  # the same model
    tasks.write_text("".join(lines))
    done = place.grove(
        "batch", str(tasks), "--simulate", "--model", "gpt-5-mini/low", "--hosts", "1"
    )
    assert done.returncode == 0, done.stderr
    warning = "Warning: gpt-5-mini is deprecated and shuts down on 2026-12-11; use gpt-6.1-terra"
    assert done.stderr.splitlines().count(warning) == 1, done.stderr
    assert "Batch finished: 3 ok" in done.stdout
