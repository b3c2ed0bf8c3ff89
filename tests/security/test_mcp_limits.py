"""MCP servers cannot hang a turn or flood a host: a call that never answers ends at the server's
`timeout_s` with the reason (the server is stopped, the next call starts it again), a server
that never starts costs `startup_timeout_s` and leaves no process behind, and a 200 MB answer
is refused at the message cap as it is read, over stdio and over HTTP, in bounded memory.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from grove.supervisor import Grove
from grove.supervisor.config import load_settings
from grove.supervisor.errors import ConfigError
from tests.integration.groves import running_grove, sim_call, tool_results
from tests.mcp_servers import running, served_over_http

HOSTILE = Path(__file__).resolve().parents[1] / "mcp_servers" / "hostile.py"
MODEL = "claude-haiku-4-5"
CALL_LIMIT_S = 2  # waited out twice (stdio, HTTP); the echo and pid calls take 0.2 s
START_LIMIT_S = 2
CAP = "a message over 16,777,216 bytes, the limit"


@pytest.fixture(scope="module")
def web() -> Iterator[str]:
    """The hostile server over streamable HTTP with JSON answers."""
    with served_over_http(HOSTILE, "--json") as url:
        yield url


@pytest.fixture(scope="module")
def grove(tmp_path_factory: pytest.TempPathFactory, web: str) -> Iterator[Grove]:
    base = tmp_path_factory.mktemp("mcp-limits")
    python, hostile = json.dumps(sys.executable), json.dumps(str(HOSTILE))
    (base / "none.toml").write_text(
        f"""
[mcp.servers.hostile]
command = {python}
args = [{hostile}]
timeout_s = {CALL_LIMIT_S}
startup_timeout_s = 60

[mcp.servers.bulky]  # the same, with time to build 200 MB of JSON
command = {python}
args = [{hostile}]
startup_timeout_s = 60

[mcp.servers.mute]
command = {python}
args = [{hostile}, "--never-start"]
startup_timeout_s = {START_LIMIT_S}

[mcp.servers.web]
url = "{web}"
timeout_s = {CALL_LIMIT_S}

[mcp.servers.webbulky]
url = "{web}"
"""
    )
    with running_grove(base, hosts=1) as grove:
        yield grove


def last_result(grove: Grove, agent: str) -> dict[str, object]:
    return tool_results(grove, agent)[-1]


def mute_servers() -> list[int]:
    """Processes of the server that never starts (the only ones with `--never-start`)."""
    return running(HOSTILE, with_word="--never-start")


@pytest.mark.parametrize("server", ["hostile", "web"])
def test_a_call_that_never_answers_ends_at_timeout_s_with_the_reason(
    grove: Grove, server: str
) -> None:
    root = grove.create_root(MODEL, tools=[f"mcp__{server}"]).uuid
    assert grove.ask(root, sim_call(f"mcp__{server}__pid")).ok
    first_pid = last_result(grove, root)["content"]
    started = time.monotonic()
    assert grove.ask(root, sim_call(f"mcp__{server}__hang"), timeout_s=120).ok
    took = time.monotonic() - started
    hung = last_result(grove, root)
    assert hung["is_error"]
    stopped = (
        "it was stopped and starts again on the next call"
        if server == "hostile"
        else "its session was closed; the next call opens another"
    )
    assert str(hung["content"]).startswith(
        f"MCP server {server} did not answer the call to hang within {CALL_LIMIT_S} s "
        f"(timeout_s); {stopped}"
    ), hung["content"]
    assert took < CALL_LIMIT_S + 30, took  # the call's limit and a restart, not 120 s or more
    assert grove.ask(root, sim_call(f"mcp__{server}__echo", text="back")).ok
    assert last_result(grove, root)["content"] == "back"
    assert grove.ask(root, sim_call(f"mcp__{server}__pid")).ok
    if server == "hostile":  # the stuck process was stopped: another one answers
        assert last_result(grove, root)["content"] != first_pid


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


@pytest.mark.parametrize("server", ["bulky", "webbulky"])
def test_a_200_mb_answer_is_refused_at_the_cap_as_it_is_read(grove: Grove, server: str) -> None:
    (host,) = grove.host_pids().values()
    root = grove.create_root(MODEL, tools=[f"mcp__{server}"]).uuid
    assert grove.ask(root, sim_call(f"mcp__{server}__echo", text="warm")).ok
    before = peak_rss_mb(host)
    call = sim_call(f"mcp__{server}__huge", megabytes=200)
    assert grove.ask(root, call, timeout_s=300).ok
    refused = last_result(grove, root)
    assert refused["is_error"]
    assert f"MCP server {server} answered the call to huge with {CAP}" in str(refused["content"])
    assert peak_rss_mb(host) - before < 120, (before, peak_rss_mb(host))  # not 200 MB and more


def test_a_server_that_never_starts_costs_its_startup_timeout_and_is_gone(
    grove: Grove, caplog: pytest.LogCaptureFixture
) -> None:
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="grove.mcp"):
        root = grove.create_root(MODEL, tools=["mcp__mute", "mcp__hostile__echo"]).uuid
    took = time.monotonic() - started
    (warning,) = [r.getMessage() for r in caplog.records if r.name == "grove.mcp"]
    assert warning.startswith(
        f"MCP server mute did not start within {START_LIMIT_S} s (startup_timeout_s)"
    ), warning
    assert "hostile server: not answering" in warning  # the end of its stderr
    assert took < START_LIMIT_S + 60, took  # the other server starts meanwhile, not after
    assert mute_servers() == []
    assert grove.ask(root, sim_call("mcp__hostile__echo", text="on")).ok


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("timeout_s = 0", "timeout_s"),
        ("startup_timeout_s = -1", "startup_timeout_s"),
        ("timeout_s = 100000", "timeout_s"),
    ],
)
def test_limits_out_of_range_are_refused_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, setting: str, message: str
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f'[mcp.servers.x]\ncommand = "x"\n{setting}\n')
    monkeypatch.setenv("GROVE_CONFIG_FILE", str(config))
    with pytest.raises(ConfigError) as refused:
        load_settings()
    assert f"mcp.servers.x.{message}" in str(refused.value)
