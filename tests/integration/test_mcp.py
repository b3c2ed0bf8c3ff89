"""MCP servers end to end: real MCPServer processes over stdio and streamable HTTP, their tools
as `mcp__SERVER__TOOL`, one server process per host whatever the number of agents, a crashed
server started again, and a server that cannot start: one warning, and the agent goes on.
"""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from grove.supervisor import AsyncGrove, Grove
from grove.supervisor.config_tools import McpSection, McpServerSection
from grove.supervisor.tool_rules import grant_of
from tests.integration.groves import running_grove
from tests.integration.groves import sim_call as call
from tests.integration.groves import tool_results as results
from tests.mcp_servers import running, served_over_http

MODEL = "claude-haiku-4-5"
CALC = Path(__file__).resolve().parents[1] / "mcp_servers" / "calc.py"


@pytest.fixture(scope="module")
def http_server() -> Iterator[str]:
    with served_over_http(CALC) as url:
        yield url


@pytest.fixture(scope="module")
def calc(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the tests' server of this module's own: the processes counted here are the
    Grove's, not those of a module running beside it in another worker."""
    server = tmp_path_factory.mktemp("calc") / "calc.py"
    shutil.copy(CALC, server)
    return server


@pytest.fixture(scope="module")
def grove(
    tmp_path_factory: pytest.TempPathFactory, http_server: str, calc: Path
) -> Iterator[Grove]:
    base = tmp_path_factory.mktemp("mcp")
    broken = "import sys; sys.stderr.write('missing license file\\n'); sys.exit(1)"
    garbage = "import sys; print('hello, not json-rpc', flush=True); sys.stdin.read()"
    (base / "none.toml").write_text(
        f"""
[mcp.servers.calc]
command = {json.dumps(sys.executable)}
args = [{json.dumps(str(calc))}]

[mcp.servers.web]
url = "{http_server}"

[mcp.servers.garbage]
command = {json.dumps(sys.executable)}
args = ["-c", {json.dumps(garbage)}]

[mcp.servers.broken]
command = {json.dumps(sys.executable)}
args = ["-c", {json.dumps(broken)}]

[mcp.servers.missing]
command = "no-such-mcp-server"
"""
    )
    with running_grove(base, hosts=2) as grove:
        yield grove


def test_stdio_and_http_servers_tools_are_called(grove: Grove) -> None:
    root = grove.create_root(MODEL, tools=["mcp__calc", "mcp__web__add"]).uuid
    names = [tool["name"] for tool in grove.agent(root).metadata["mcp_tools"]]
    assert "mcp__calc__add" in names and "mcp__web__add" in names
    # what a call cut off by its host's death may do: run again, from the annotations
    again = set(grant_of(grove.agent(root).metadata).mcp_idempotent)
    assert again == {"mcp__calc__add", "mcp__calc__pid", "mcp__web__add"}
    assert "mcp__web__pid" not in grove.agent(root).metadata["tools"]
    assert grove.ask(root, call("mcp__calc__add", a=2, b=3)).ok
    assert grove.ask(root, call("mcp__web__add", a=20, b=22)).ok
    assert grove.ask(root, call("mcp__calc__refuse", reason="no")).ok
    stdio, http, refused = results(grove, root)
    assert (stdio["content"], http["content"]) == ("5", "42")
    assert refused["is_error"] is True
    listing = grove.dispatch(root, "/mcp").text.splitlines()
    assert listing == ["calc: add, pid, has_variable, refuse, badge, die", "web: add"]


def test_a_server_process_per_host_whatever_the_number_of_agents(grove: Grove, calc: Path) -> None:
    roots = [grove.create_root(MODEL, tools=["mcp__calc"]).uuid for _ in range(8)]
    turns = [grove.send(root, call("mcp__calc__pid")) for root in roots]
    assert all(turn.result().ok for turn in turns)
    pids = {results(grove, root)[-1]["content"] for root in roots}
    assert 1 <= len(pids) <= 2  # two hosts: at most two servers, shared by all eight agents
    assert len(running(calc, without_word="--http")) <= 2


def test_a_crashed_server_is_started_again(grove: Grove) -> None:
    root = grove.create_root(MODEL, tools=["mcp__calc"]).uuid
    assert grove.ask(root, call("mcp__calc__die")).ok
    assert grove.ask(root, call("mcp__calc__add", a=1, b=1)).ok
    died, added = results(grove, root)
    assert died["is_error"] and "MCP server calc failed the call to die" in died["content"]
    assert added["content"] == "2"


def test_the_servers_environment_has_no_provider_keys(grove: Grove) -> None:
    root = grove.create_root(MODEL, tools=["mcp__calc"]).uuid
    assert grove.ask(root, call("mcp__calc__has_variable", name="ANTHROPIC_API_KEY")).ok
    assert results(grove, root)[-1]["content"] == "no"


def test_a_grove_lists_a_server_once_for_its_roots_and_again_once_its_config_changed(
    grove: Grove, calc: Path, tmp_path: Path
) -> None:
    """Roots granted a server's tools get them from one listing of the server per
    configuration: a server with another environment is another configuration."""
    starts = tmp_path / "starts"
    counted = McpServerSection(
        command=sys.executable, args=[str(calc)], env={"CALC_STARTS": str(starts)}
    )
    changed = counted.model_copy(update={"env": {**counted.env, "CALC_LEVEL": "2"}})
    configured = grove.settings
    try:
        for listings, server in enumerate((counted, changed), start=1):
            servers = {**configured.mcp.servers, "counted": server}
            grove.settings = configured.model_copy(update={"mcp": McpSection(servers=servers)})
            for _ in range(3):
                root = grove.create_root(MODEL, tools=["mcp__counted__add"]).uuid
                tools = grove.agent(root).metadata["mcp_tools"]
                assert "mcp__counted__add" in [tool["name"] for tool in tools]
            assert len(starts.read_text().splitlines()) == listings
    finally:
        grove.settings = configured


ROOTS_AT_ONCE = 4


def test_roots_made_at_once_list_a_server_once_from_threads_and_from_one_loop(
    grove: Grove, calc: Path, tmp_path: Path
) -> None:
    """Roots made at the same time, as the service's threads or an AsyncGrove's callers on
    one event loop make them, wait for one listing of a new server instead of each starting
    it; each root gets its tools."""
    starts = {way: tmp_path / f"starts-{way}" for way in ("threads", "loop")}
    configured = grove.settings
    servers = {
        f"counted_{way}": McpServerSection(
            command=sys.executable, args=[str(calc)], env={"CALC_STARTS": str(path)}
        )
        for way, path in starts.items()
    }
    grant = {way: [f"mcp__counted_{way}__add"] for way in starts}
    grove.settings = configured.model_copy(
        update={"mcp": McpSection(servers={**configured.mcp.servers, **servers})}
    )

    def tool_names(root: str) -> list[str]:
        return [tool["name"] for tool in grove.agent(root).metadata["mcp_tools"]]

    async def from_one_loop() -> list[str]:
        together = AsyncGrove(grove)
        made = await asyncio.gather(
            *(together.create_root(MODEL, tools=grant["loop"]) for _ in range(ROOTS_AT_ONCE))
        )
        return [record.uuid for record in made]

    try:
        with ThreadPoolExecutor(ROOTS_AT_ONCE) as pool:
            made = pool.map(
                lambda _: grove.create_root(MODEL, tools=grant["threads"]).uuid,
                range(ROOTS_AT_ONCE),
            )
            threaded = list(made)
        looped = asyncio.run(from_one_loop())
        for way, roots in (("threads", threaded), ("loop", looped)):
            assert all(grant[way][0] in tool_names(root) for root in roots), way
            assert len(starts[way].read_text().splitlines()) == 1, way
    finally:
        grove.settings = configured


def test_a_server_that_cannot_start_is_one_warning_and_the_agent_goes_on(
    grove: Grove, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="grove.mcp"):
        root = grove.create_root(MODEL, tools=["mcp__broken", "mcp__calc__add"]).uuid
    (warning,) = [r.getMessage() for r in caplog.records if r.name == "grove.mcp"]
    assert warning.startswith("MCP server broken ")
    assert "missing license file" in warning
    assert warning == (
        "MCP server broken failed to start: it exited (or closed its output) before the MCP "
        "handshake; its stderr ends:\nmissing license file"
    )
    assert grove.ask(root, call("mcp__calc__add", a=1, b=2)).ok
    assert results(grove, root)[-1]["content"] == "3"


def test_an_image_result_reaches_the_model_on_every_wire(grove: Grove) -> None:
    for model in ("claude-haiku-4-5", "gpt-5-mini", "gemini-3.0-flash"):
        root = grove.create_root(model, tools=["mcp__calc"]).uuid
        result = grove.ask(root, call("mcp__calc__badge"))
        assert result.ok, (model, result.error)
        (badge,) = results(grove, root)
        assert badge["content"] == "[image image/png, attached]"
        (image,) = badge["images"]
        assert image["media_type"] == "image/png" and image["data"].startswith("iVBOR")


def test_a_server_that_answers_garbage_fails_its_start_at_once(
    grove: Grove, caplog: pytest.LogCaptureFixture
) -> None:
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="grove.mcp"):
        root = grove.create_root(MODEL, tools=["mcp__garbage"]).uuid
    assert time.monotonic() - started < 20
    (warning,) = [r.getMessage() for r in caplog.records if r.name == "grove.mcp"]
    assert warning == "MCP server garbage failed to start: it sent something that is not JSON-RPC"
    assert grove.ask(root, "still here?").ok


def test_a_server_whose_command_cannot_run_says_so(
    grove: Grove, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="grove.mcp"):
        root = grove.create_root(MODEL, tools=["mcp__missing"]).uuid
    (warning,) = [r.getMessage() for r in caplog.records if r.name == "grove.mcp"]
    assert warning == (
        "MCP server missing failed to start: cannot run 'no-such-mcp-server': "
        "No such file or directory"
    )
    assert grove.ask(root, "still here?").ok
