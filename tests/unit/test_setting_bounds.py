"""Settings bounded by name, read from a config file and the environment: `[hosts]
idle_pools`, `[advisor] retry_delay_s` and `[tools.sandbox]`'s limits and variable names; the
environment wins over the file."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from grove.supervisor.config import load_settings
from grove.supervisor.config_tools import SandboxSection
from tests.unit.settings_files import refused


def test_idle_pools_is_bounded_by_name(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    monkeypatch.setenv("GROVE_CONFIG_FILE", str(config))
    assert load_settings().hosts.idle_pools == 512
    for value, problem in (
        ("-1", "hosts.idle_pools: Input should be greater than or equal to 0"),
        ("100001", "hosts.idle_pools: Input should be less than or equal to 100000"),
        ("2.5", "hosts.idle_pools: Input should be a valid integer"),
    ):
        assert problem in refused(config, f"[hosts]\nidle_pools = {value}\n")
    config.write_text("[hosts]\nidle_pools = 0\n")  # every pool closed as its turn ends
    assert load_settings().hosts.idle_pools == 0
    monkeypatch.setenv("GROVE_HOSTS__IDLE_POOLS", "64")
    assert load_settings().hosts.idle_pools == 64


def test_a_reviewers_wait_after_a_failed_review_is_bounded_by_name(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config = tmp_path / "config.toml"
    monkeypatch.setenv("GROVE_CONFIG_FILE", str(config))
    assert load_settings().advisor.retry_delay_s == 1.0
    for value, problem in (
        ("0", "advisor.retry_delay_s: Input should be greater than 0"),
        ("601", "advisor.retry_delay_s: Input should be less than or equal to 600"),
        ("inf", "advisor.retry_delay_s: Input should be a finite number"),
    ):
        assert problem in refused(config, f"[advisor]\nretry_delay_s = {value}\n")
    config.write_text("[advisor]\nretry_delay_s = 2.5\n")
    assert load_settings().advisor.retry_delay_s == 2.5
    monkeypatch.setenv("GROVE_ADVISOR__RETRY_DELAY_S", "0.1")
    assert load_settings().advisor.retry_delay_s == 0.1


def test_the_sandboxs_limits_are_bounded_by_name(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config = tmp_path / "config.toml"
    monkeypatch.setenv("GROVE_CONFIG_FILE", str(config))
    sandbox = load_settings().tools.sandbox
    assert (sandbox.processes, sandbox.memory_mb, sandbox.file_size_mb) == (512, 8192, 512)
    assert (sandbox.cpu_s, sandbox.tmp_mb, sandbox.env) == (600, 256, [])
    for setting, problem in (
        ("processes = 15", "processes: Input should be greater than or equal to 16"),
        ("processes = 65537", "processes: Input should be less than or equal to 65536"),
        ("memory_mb = 63", "memory_mb: Input should be greater than or equal to 64"),
        ("memory_mb = 1048577", "memory_mb: Input should be less than or equal to 1048576"),
        ("file_size_mb = 0", "file_size_mb: Input should be greater than or equal to 1"),
        ("cpu_s = 86401", "cpu_s: Input should be less than or equal to 86400"),
        ("tmp_mb = 0", "tmp_mb: Input should be greater than or equal to 1"),
        ("tmp_mb = 2.5", "tmp_mb: Input should be a valid integer"),
        ('env = ["A B"]', "env: Value error, 'A B' is not a variable name (letters, digits and _)"),
        (
            'env = ["OPENAI_API_KEY"]',
            "env: Value error, OPENAI_API_KEY is a provider's key: no tool's process gets it",
        ),
        ("env = " + str(["V"] * 257), "env: List should have at most 256 items"),
    ):
        message = refused(config, f"[tools.sandbox]\n{setting}\n")
        assert f"tools.sandbox.{problem}" in message, message
    config.write_text('[tools.sandbox]\nprocesses = 64\ntmp_mb = 32\nenv = ["PROJECT_FLAG"]\n')
    sandbox = load_settings().tools.sandbox
    assert (sandbox.processes, sandbox.tmp_mb, sandbox.env) == (64, 32, ["PROJECT_FLAG"])
    monkeypatch.setenv("GROVE_TOOLS__SANDBOX__PROCESSES", "128")
    limits = load_settings().tools.sandbox.limits()
    assert (limits.processes, limits.tmp_mb, limits.memory_mb) == (128, 32, 8192)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=140))
def test_a_sandbox_variable_name_is_taken_or_refused_in_one_line(name: str) -> None:
    try:
        section = SandboxSection(env=[name])
    except ValidationError as refused_name:
        (error,) = refused_name.errors()
        assert error["msg"].startswith("Value error, "), error
        assert error["msg"].endswith(
            ("is not a variable name (letters, digits and _)", "no tool's process gets it")
        )
    else:
        assert section.env == [name] and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name)
