"""`grove mcp` driven by the MCP SDK's own client over stdio, started as the README's editor
configuration says: the tools with their schemas, a run, a fork and its wait, the agents, a
batch, bad arguments as tool errors; and the same tools on a running service (the service's API
over a Grove of this process).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.types import CallToolResult

from tests.integration.groves import cli_environment, running_grove
from tests.integration.readme import readme_section
from tests.integration.services import service_in_process

GROVE = str(Path(sys.executable).with_name("grove"))
TOOLS = {"grove_run", "grove_fork", "grove_wait", "grove_agents", "grove_batch"}
DEFAULT_MODEL = {"GROVE_DEFAULTS__MODEL": "claude-sonnet-5-5"}


def editor_configuration() -> dict[str, Any]:
    """The `grove` entry of the README's MCP client configuration."""
    section = readme_section("Grove as an MCP server")
    (block,) = re.findall(r"```json\n(.+?)\n```", section, re.DOTALL)
    entry: dict[str, Any] = json.loads(block)["mcpServers"]["grove"]
    assert entry["command"].endswith("/.venv/bin/grove")
    return entry


def configured(env: dict[str, str], cwd: Path, *extra: str) -> StdioServerParameters:
    """The README's configuration with this virtual environment's `grove`."""
    entry = editor_configuration()
    return StdioServerParameters(command=GROVE, args=[*entry["args"], *extra], env=env, cwd=cwd)


@pytest.fixture
def server(tmp_path: Path) -> StdioServerParameters:
    """`grove mcp --simulate` with a store and a config directory of its own."""
    env = {**cli_environment(tmp_path, tmp_path / "none.toml"), **DEFAULT_MODEL}
    return configured(env, tmp_path, "--simulate")


def answer(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    found: dict[str, Any] = json.loads(result.content[0].text)  # type: ignore[union-attr]
    return found


def error_text(result: CallToolResult) -> str:
    assert result.is_error
    return "".join(part.text for part in result.content)  # type: ignore[union-attr]


async def test_a_client_runs_forks_waits_lists_and_batches(server: StdioServerParameters) -> None:
    not_protocol: list[Exception] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, Exception):  # a line on stdout that is not JSON-RPC
            not_protocol.append(message)

    async with Client(server, message_handler=on_message) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(tools) == TOOLS
        for tool in tools.values():
            assert tool.description and len(tool.description) > 40
            assert tool.input_schema["type"] == "object"
        assert tools["grove_run"].input_schema["required"] == ["prompt"]
        assert set(tools["grove_fork"].input_schema["required"]) == {"agent", "prompts"}
        assert tools["grove_wait"].input_schema["properties"]["timeout_s"]["maximum"] == 3600

        run = answer(await client.call_tool("grove_run", {"prompt": "Name one prime."}))
        assert run["ok"] and run["text"] and run["usage"]["output_tokens"] > 0
        root = run["agent"]

        prompts = ["Name a colour.", "Name a river.", "Name a tree."]
        forked = answer(
            await client.call_tool("grove_fork", {"agent": root[:8], "prompts": prompts})
        )
        assert forked["parent"] == root and len(forked["children"]) == 3
        waited = answer(
            await client.call_tool("grove_wait", {"agents": forked["children"], "timeout_s": 120})
        )
        assert waited["pending"] == []
        assert set(waited["results"]) == set(forked["children"])
        assert all(result["ok"] and result["text"] for result in waited["results"].values())

        listed = answer(await client.call_tool("grove_agents", {}))
        uuids = {row["uuid"] for row in listed["agents"]}
        assert {root, *forked["children"]} <= uuids

        tasks = ["Summarize the context.", {"id": "b", "prompt": "Name its topic."}]
        batch = answer(
            await client.call_tool(
                "grove_batch", {"tasks": tasks, "context": "Forks share a conversation."}
            )
        )
        assert sorted(str(record["id"]) for record in batch["records"]) == ["1", "b"]
        assert all(record["status"] == "ok" and record["text"] for record in batch["records"])

        # Bad arguments come back as the tool's error, and the server goes on.
        empty = error_text(await client.call_tool("grove_fork", {"agent": root, "prompts": []}))
        assert "prompts" in empty
        unknown = error_text(await client.call_tool("grove_wait", {"agents": ["zzzz"]}))
        assert "zzzz" in unknown
        model = error_text(
            await client.call_tool("grove_run", {"prompt": "hi", "model": "unknown-model"})
        )
        assert "Unknown model: unknown-model" in model
        # A typo and a retired model are refused as the command line refuses them.
        typo = error_text(
            await client.call_tool("grove_run", {"prompt": "hi", "model": "claude-sonet-5-5"})
        )
        assert typo.endswith(
            ": Unknown model: claude-sonet-5-5. Did you mean claude-sonnet-5-5? (To send "
            "claude-sonet-5-5 as written, name it anthropic:claude-sonet-5-5.)"
        )
        retired = error_text(
            await client.call_tool("grove_run", {"prompt": "hi", "model": "claude-sonnet-4-5/low"})
        )
        assert retired.endswith(
            ": claude-sonnet-4-5 was retired on 2026-11-30; use claude-sonnet-5-5"
        )
        retired_fork = error_text(
            await client.call_tool(
                "grove_fork", {"agent": root, "prompts": ["a"], "model": "gemini-2.5-pro"}
            )
        )
        assert retired_fork.endswith(
            ": gemini-2.5-pro was retired on 2026-12-01; use gemini-3.8-flash"
        )
        old = [{"id": 1, "prompt": "a"}, {"id": 2, "prompt": "b", "model": "claude-sonnet-4-5"}]
        retired_task = error_text(await client.call_tool("grove_batch", {"tasks": old}))
        assert retired_task.endswith(
            ": task 2: 'model': claude-sonnet-4-5 was retired on 2026-11-30; use claude-sonnet-5-5"
        )
        twice = [{"id": 1, "prompt": "a"}, {"id": "1", "prompt": "b"}]
        duplicate = error_text(await client.call_tool("grove_batch", {"tasks": twice}))
        assert "task 2: the id '1' is used twice" in duplicate
        late = error_text(await client.call_tool("grove_wait", {"agents": [root], "timeout_s": -1}))
        assert "timeout_s" in late
        again = answer(await client.call_tool("grove_agents", {}))
        assert len(again["agents"]) >= len(listed["agents"])
    assert not_protocol == []


async def test_with_a_service_up_the_tools_run_on_it(tmp_path: Path) -> None:
    with (
        running_grove(tmp_path, hosts=1, env=DEFAULT_MODEL) as grove,
        service_in_process(grove, tmp_path, env=DEFAULT_MODEL) as service,
    ):
        async with Client(configured(service.env, tmp_path)) as client:
            run = answer(await client.call_tool("grove_run", {"prompt": "Name one prime."}))
            forked = answer(
                await client.call_tool("grove_fork", {"agent": run["agent"], "prompts": ["a", "b"]})
            )
            waited = answer(await client.call_tool("grove_wait", {"agents": forked["children"]}))
            assert waited["pending"] == [] and len(waited["results"]) == 2
        with service.api() as api:  # the service made them: its own agents list them
            listed = api.get("/api/agents", params={"include_ended": "false"}).json()["agents"]
        assert {run["agent"], *forked["children"]} <= {row["uuid"] for row in listed}
