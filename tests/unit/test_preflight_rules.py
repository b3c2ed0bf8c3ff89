"""The pure parts of the checks before a Grove starts: which providers have a key (found without
keeping it), which MCP server commands cannot be found, and a model named as written.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import typer

from grove.cli.preflight import checked_model
from grove.providers.credentials import signed_in
from grove.supervisor.config_tools import McpServerSection
from grove.supervisor.tool_rules import mcp_problems


def test_signed_in_reads_the_environment_then_the_credentials_file(tmp_path: Path) -> None:
    env = {"XDG_CONFIG_HOME": str(tmp_path)}
    assert signed_in(env) == []
    assert signed_in({**env, "GEMINI_API_KEY": "k", "OPENAI_API_KEY": ""}) == ["google"]
    (tmp_path / "grove").mkdir()
    credentials = tmp_path / "grove" / "credentials.json"
    credentials.write_text(json.dumps({"anthropic": {"api_key": "k"}, "openai": {}}))
    credentials.chmod(0o600)
    assert signed_in(env) == ["anthropic"]


def test_mcp_problems_name_each_enabled_server_whose_command_is_missing(tmp_path: Path) -> None:
    script = tmp_path / "server.py"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    (tmp_path / "bin").mkdir()
    servers = {
        "found": McpServerSection(command="sh"),
        "missing": McpServerSection(command="no-such-command-here"),
        "off": McpServerSection(command="no-such-command-here", enabled=False),
        "http": McpServerSection(url="http://127.0.0.1:9/mcp"),
        "script": McpServerSection(command="./server.py", cwd=str(tmp_path)),
        "not-executable": McpServerSection(command="./bin", cwd=str(tmp_path)),
        "own-path": McpServerSection(command="sh", env={"PATH": str(tmp_path / "bin")}),
    }
    assert mcp_problems(servers) == [
        "MCP server missing: command 'no-such-command-here' is not on PATH; fix "
        "[mcp.servers.missing] command (a full path) or set enabled = false",
        f"MCP server not-executable: command '.{os.sep}bin' is not an executable file; fix "
        "[mcp.servers.not-executable] command or set enabled = false",
        "MCP server own-path: command 'sh' is not on PATH; fix [mcp.servers.own-path] command "
        "(a full path) or set enabled = false",
    ]


def test_a_model_named_with_its_provider_is_taken_as_written() -> None:
    spec = checked_model("anthropic:claude-sonet-4-5/low", {}).spec
    assert (spec.provider, spec.model, spec.thinking) == ("anthropic", "claude-sonet-4-5", "low")
    spec = checked_model("mine", {"mine": "openai:gpt-5-mni"}).spec
    assert (spec.provider, spec.model) == ("openai", "gpt-5-mni")
    assert checked_model("claude-sonnet-5-5/med", {}).spec.model == "claude-sonnet-5-5"
    with pytest.raises(typer.Exit):
        checked_model("mine", {"mine": "gpt-5-mni"})  # an alias to a typo is still a typo
    # A retired id named with its provider is sent as written, without a warning.
    written = checked_model("anthropic:claude-sonnet-4-5", {})
    assert (written.spec.model, written.warning) == ("claude-sonnet-4-5", None)
    with pytest.raises(typer.Exit):
        checked_model("old", {"old": "claude-sonnet-4-5"})
