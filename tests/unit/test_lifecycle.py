"""Models' lifecycle on a given day (providers/lifecycle.py): a retired model refused in one line
naming its successor wherever a model is chosen (flags, config files, task lines, /fork), a
deprecated or soon-retiring one warned about, `PROVIDER:MODEL` sent as written, the clock tests
set; and the texts that name models built from the catalog.
"""

from __future__ import annotations

import re
from datetime import date
from pathlib import Path
from typing import get_args

import pytest
from hypothesis import given
from hypothesis import strategies as st

from grove.providers.base import ProviderName
from grove.providers.catalog import CATALOG, DEFAULT_MODELS, MODELS, PROVIDER_TITLES
from grove.providers.errors import ClockError, RetiredModelError
from grove.providers.lifecycle import (
    TODAY_ENV,
    choose_model,
    chosen_model,
    stale_agents,
    standing,
    today,
)
from grove.supervisor.advisor_plan import AdvisorPlan
from grove.supervisor.batch.tasks import read_tasks
from grove.supervisor.commands.builtin import advisor_status_text
from grove.supervisor.commands.parsing import parse_fork_args
from grove.supervisor.config import config_path, load_settings
from grove.supervisor.errors import CommandError, ConfigError
from grove.supervisor.rules import NO_MODEL_TEXT, no_model_flag_text

DAY = date(2026, 12, 4)
SONNET_RETIRED = "claude-sonnet-4-5 was retired on 2026-11-30; use claude-sonnet-5-5"
# The reference's "No model configured" text (spec/commands-model-fork.md), copied literally
# as it names the models of its time, so a checkout without the reference beside it runs this.
REFERENCE_NO_MODEL = """No model configured. Use /model to select one.

Examples:
  /model claude-sonnet-4-5      (Anthropic)
  /model gpt-5-mini             (OpenAI)
  /model gemini-3.0-flash       (Google)

Run /model with Tab for available options."""


def test_a_retired_model_is_refused_in_one_line_naming_its_successor() -> None:
    with pytest.raises(RetiredModelError) as refused:
        chosen_model("claude-sonnet-4-5", day=DAY)
    assert (
        str(refused.value) == "claude-sonnet-4-5 was retired on 2026-11-30; use claude-sonnet-5-5"
    )
    with pytest.raises(RetiredModelError) as snapshot:
        chosen_model("claude-sonnet-4-5-20250929/low", day=DAY)  # a dated snapshot retires too
    assert str(snapshot.value) == (
        "claude-sonnet-4-5-20250929 was retired on 2026-11-30; use claude-sonnet-5-5"
    )
    with pytest.raises(RetiredModelError) as aliased:
        chosen_model("old", {"old": "gemini-2.5-pro/high"}, day=DAY)
    assert str(aliased.value) == "gemini-2.5-pro was retired on 2026-12-01; use gemini-3.8-flash"


def test_a_model_named_with_its_provider_is_sent_as_written() -> None:
    for text, aliases in (
        ("anthropic:claude-sonnet-4-5", None),
        ("x", {"x": "google:gemini-2.5-pro"}),
    ):
        choice = choose_model(text, aliases, day=DAY)
        assert choice.warning is None and choice.spec.as_written
        assert chosen_model(str(choice.spec), day=DAY) == choice.spec  # prints back as written


def test_deprecated_and_soon_retiring_models_warn_with_date_and_successor() -> None:
    assert choose_model("gpt-5-mini/low", day=DAY).warning == (
        "Warning: gpt-5-mini is deprecated and shuts down on 2026-12-11; use gpt-6.1-terra"
    )
    assert choose_model("claude-opus-4-5", day=DAY).warning == (
        "Warning: claude-opus-4-5 is deprecated and shuts down on 2027-01-22; use claude-opus-5-5"
    )
    # Current, with a shutdown date and no successor: a warning only within 30 days of it.
    assert choose_model("gemini-3.1-flash-lite", day=DAY).warning is None
    assert choose_model("gemini-3.1-flash-lite", day=date(2027, 4, 7)).warning == (
        "Warning: gemini-3.1-flash-lite shuts down on 2027-05-07; `grove models` lists the "
        "current ones"
    )
    assert choose_model("gemini-3.1-flash-lite", day=date(2027, 4, 6)).warning is None  # 31 days
    for current in DEFAULT_MODELS.values():
        assert choose_model(current, day=DAY).warning is None
    # A new id with a known prefix is its family's newest kind: no verdict of an old model.
    assert choose_model("claude-sonnet-9", day=DAY).warning is None


def test_the_day_decides_when_a_deprecated_model_retires() -> None:
    assert choose_model("gpt-5-mini", day=date(2026, 12, 10)).warning is not None
    with pytest.raises(RetiredModelError, match=r"^gpt-5-mini was retired on 2026-12-11; use "):
        chosen_model("gpt-5-mini", day=date(2026, 12, 11))
    # Before its shutdown date, a model the data file calls retired was only deprecated.
    assert choose_model("claude-sonnet-4-5", day=date(2026, 11, 29)).warning == (
        "Warning: claude-sonnet-4-5 is deprecated and shuts down on 2026-11-30; use "
        "claude-sonnet-5-5"
    )


def test_today_is_grove_today_when_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TODAY_ENV, "2026-12-11")
    assert today() == date(2026, 12, 11)
    with pytest.raises(RetiredModelError):
        chosen_model("gpt-5-nano")
    monkeypatch.setenv(TODAY_ENV, "next tuesday")
    with pytest.raises(ClockError) as bad:
        today()
    assert str(bad.value) == "GROVE_TODAY must be a date as YYYY-MM-DD, not 'next tuesday'"
    monkeypatch.delenv(TODAY_ENV)
    assert today() == date.today()


def test_resuming_an_agent_on_a_retired_model_names_the_model_to_switch_to() -> None:
    verdict = standing("claude-sonnet-4-5", DAY)
    assert verdict is not None and verdict.retired
    assert verdict.resume_text == (
        "This agent's model claude-sonnet-4-5 was retired on 2026-11-30; switch it with "
        "/model claude-sonnet-5-5"
    )


def test_stale_agents_are_those_on_retired_deprecated_or_retiring_models() -> None:
    agents = [
        ("a1", "claude-sonnet-5-5"),
        ("a2", "claude-sonnet-4-5"),
        ("a3", "gpt-5-mini"),
        ("a4", "claude-sonnet-4-5"),
        ("a5", "house-model"),  # a compatible server's own id: nothing to say
    ]
    found = [(agent, verdict.notice) for agent, verdict in stale_agents(agents, DAY)]
    assert found == [
        ("a2", SONNET_RETIRED),
        ("a3", "Warning: gpt-5-mini is deprecated and shuts down on 2026-12-11; use gpt-6.1-terra"),
        ("a4", SONNET_RETIRED),
    ]


def test_every_retired_model_of_the_catalog_is_refused_and_every_current_one_taken() -> None:
    day = CATALOG.as_of
    for info in MODELS.values():
        verdict = standing(info.id, day)
        assert verdict is not None
        if info.status == "retired":
            with pytest.raises(RetiredModelError):
                chosen_model(info.id, day=day)
        elif info.status == "current" and info.id in DEFAULT_MODELS.values():
            assert chosen_model(info.id, day=day).model == info.id


def write_config(tmp_path: Path, text: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text)
    monkeypatch.setenv("GROVE_CONFIG_FILE", str(path))
    monkeypatch.setenv(TODAY_ENV, DAY.isoformat())
    return path


@pytest.mark.parametrize(
    ("section", "shown", "problem"),
    [
        ('[defaults]\nmodel = "claude-sonnet-4-5/med"', "defaults.model", "retired"),
        ('[advisor]\nmodel = "claude-sonnet-4-5/med"', "advisor.model", "retired"),
        (
            '[[advisor.reviewers]]\nname = "r"\nmodel = "gemini-2.5-flash"',
            "advisor.reviewers.0.model",
            "retired",
        ),
        ('[defaults]\nmodel = "claude-sonet-5-5"', "defaults.model", "typo"),
    ],
)
def test_an_unknown_or_retired_model_in_the_config_file_is_one_line(
    section: str, shown: str, problem: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_config(tmp_path, section + "\n", monkeypatch)
    before = path.read_text()
    with pytest.raises(ConfigError) as refused:
        load_settings()
    text = str(refused.value)
    assert "\n" not in text and f"{shown}: Value error, " in text
    if problem == "retired":
        assert re.search(r"was retired on \d{4}-\d{2}-\d{2}; use [a-z0-9.-]+$", text), text
    else:
        assert text.endswith("Did you mean claude-sonnet-5-5? (To send claude-sonet-5-5 as "
                             "written, name it anthropic:claude-sonet-5-5.)")  # fmt: skip
    assert path.read_text() == before  # nothing changed


def test_the_advisors_default_model_is_the_catalogs_current_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_config(tmp_path, "", monkeypatch)
    model = load_settings().advisor.model
    assert model == f"{DEFAULT_MODELS['anthropic']}/med"
    assert choose_model(model, day=DAY).warning is None


def test_a_task_line_keeps_its_model_as_written_for_the_checks_before_the_run() -> None:
    """A task line's model is checked with the command line's models (cli/preflight.py), so a
    retired one stops the batch before anything runs; `PROVIDER:MODEL` stays so to the end."""
    lines = [
        b'{"id": 1, "prompt": "a", "model": "claude-sonnet-4-5/low"}',
        b'{"id": 2, "prompt": "b", "model": "anthropic:claude-sonnet-4-5"}',
    ]
    read = read_tasks(b"\n".join(lines) + b"\n")
    assert read.errors == []
    assert [task.model for task in read.tasks] == [
        "claude-sonnet-4-5/low",
        "anthropic:claude-sonnet-4-5",
    ]
    with pytest.raises(RetiredModelError):
        chosen_model(read.tasks[0].model or "", day=DAY)
    assert chosen_model(read.tasks[1].model or "", day=DAY).as_written


def test_fork_with_a_retired_or_deprecated_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TODAY_ENV, DAY.isoformat())
    with pytest.raises(CommandError) as refused:
        parse_fork_args('--model claude-sonnet-4-5/high "go"')
    assert (
        str(refused.value) == "claude-sonnet-4-5 was retired on 2026-11-30; use claude-sonnet-5-5"
    )
    parsed = parse_fork_args('--model gpt-5-nano "go"')
    assert parsed.prompt == "go" and parsed.warning == (
        "Warning: gpt-5-nano is deprecated and shuts down on 2026-12-11; use gpt-6-luna"
    )


@given(st.text(max_size=60))
def test_a_chosen_model_is_a_spec_or_one_model_error(text: str) -> None:
    """Whatever is typed after /model: a spec, or a ModelSpecError with its text, nothing else."""
    from grove.providers.errors import ModelSpecError

    try:
        choice = choose_model(text, day=DAY)
    except ModelSpecError as exc:
        assert str(exc)
        return
    assert choice.warning is None or choice.warning.startswith("Warning: ")


def test_the_no_model_texts_have_the_references_shape_with_todays_defaults() -> None:
    block = REFERENCE_NO_MODEL
    old: dict[ProviderName, str] = {
        "anthropic": "claude-sonnet-4-5",
        "openai": "gpt-5-mini",
        "google": "gemini-3.0-flash",
    }
    expected = block
    for provider, model in old.items():
        line = next(line for line in block.splitlines() if f"/model {model} " in line)
        new = f"  {f'/model {DEFAULT_MODELS[provider]}':<29} ({PROVIDER_TITLES[provider]})"
        expected = expected.replace(line, new)
    assert expected == NO_MODEL_TEXT
    for model in DEFAULT_MODELS.values():
        assert model in no_model_flag_text(Path("config.toml"))
        assert choose_model(model, day=CATALOG.as_of).warning is None


def test_every_successor_is_a_current_model_of_the_same_provider() -> None:
    for info in MODELS.values():
        if info.successor is not None:
            successor = MODELS[info.successor]
            assert (successor.provider, successor.status) == (info.provider, "current"), info.id
            assert choose_model(successor.id, day=CATALOG.as_of).warning is None


def test_advisor_status_names_a_reviewers_retired_or_deprecated_model() -> None:
    plan = AdvisorPlan(enabled=True)
    rows: list[dict[str, object]] = [
        {"name": "advisor", "model": "gpt-5-mini/med"},
        {"name": "security", "model": "claude-sonnet-5-5/low"},
    ]
    lines = advisor_status_text(rows, plan).splitlines()
    assert lines[:1] == ["advisor  gpt-5-mini/med"]
    warned = [line for line in lines if "gpt-5-mini" in line and "Warning" in line]
    assert warned == [
        "  Warning: gpt-5-mini is deprecated and shuts down on 2026-12-11; use gpt-6.1-terra"
    ]
    assert not [line for line in lines if "claude-sonnet-5-5" in line and "Warning" in line]


MODEL_ID = re.compile(r"\b(?:claude|gpt|gemini)-[a-z0-9.-]*[a-z0-9]")


def test_every_model_the_help_texts_and_tool_descriptions_name_is_current() -> None:
    """What `--help` of every command and the MCP tools' descriptions show as examples are
    catalog models, neither retired nor deprecated nor shutting down soon."""
    from typer.main import get_command
    from typer.testing import CliRunner

    from grove.cli.app import app
    from grove.cli.mcp_tools import BatchTask, ModelName

    runner = CliRunner()
    texts = [runner.invoke(app, ["--help"]).stdout]
    for name in get_command(app).commands:  # type: ignore[attr-defined]
        shown = runner.invoke(app, [name, "--help"])
        assert shown.exit_code == 0, name
        texts.append(shown.stdout)
    texts += [str(get_args(ModelName)), str(BatchTask.model_json_schema())]
    named = set(MODEL_ID.findall("\n".join(texts)))
    assert "claude-sonnet-5-5" in named
    for model in sorted(named):
        assert model in MODELS, model
        assert choose_model(model, day=CATALOG.as_of).warning is None, model


def test_the_no_model_text_names_the_config_file_grove_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GROVE_CONFIG_FILE when set, else config.toml under $XDG_CONFIG_HOME (~/.config by
    default, written with ~)."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("GROVE_CONFIG_FILE", raising=False)
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    assert "(in ~/.config/grove/config.toml)\n" in no_model_flag_text(config_path())
    monkeypatch.setenv("XDG_CONFIG_HOME", "/etc/xdg-config")
    assert "(in /etc/xdg-config/grove/config.toml)\n" in no_model_flag_text(config_path())
    monkeypatch.setenv("GROVE_CONFIG_FILE", str(tmp_path / "grove.toml"))
    assert "(in ~/grove.toml)\n" in no_model_flag_text(config_path())
