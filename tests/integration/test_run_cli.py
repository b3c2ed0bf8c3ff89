"""`grove run` end to end in-process: simulator, JSON output, the reference's error texts.

The runs go to the module's Grove (started once: a command finds Ray started and joins its
supervisor, as in test_one_path.py). Nothing may be sent when the model or the key is missing:
a listening socket proves it.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from grove.cli.app import GroveGroup, app
from grove.providers.catalog import unknown_model_text
from grove.supervisor import Grove
from grove.supervisor.rules import no_model_flag_text
from grove.supervisor.store import open_store

UNKNOWN_MODEL_TEXT = unknown_model_text("unknown-model")  # the reference's, today's models
RETIRED_TEXT = "claude-sonnet-4-5 was retired on 2026-11-30; use claude-sonnet-5-5"
INVALID_THINKING_TEXT = "Invalid thinking level: maximum\nValid levels: none, low, med, high"
MISSING_ANTHROPIC_TEXT = (
    "No credentials for anthropic. Set ANTHROPIC_API_KEY or add to credentials.json\n\n"
    "Get your API key at: https://console.anthropic.com/settings/keys"
)
# Its first commands start with no Ray in this process, as a user's do: with Ray running, a
# command takes its hosts to be on a cluster and leaves the key checks to them (cli/preflight.py).
pytestmark = pytest.mark.own_ray


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    for name in (
        "ANTHROPIC_API_KEY",
        "OPENAI_API_KEY",
        "GOOGLE_API_KEY",
        "GEMINI_API_KEY",
        "ANTHROPIC_BASE_URL",
        "OPENAI_BASE_URL",
        "GOOGLE_GEMINI_BASE_URL",
    ):
        monkeypatch.delenv(name, raising=False)
    config = tmp_path / "config"
    config.mkdir()
    values = {
        "XDG_CONFIG_HOME": str(config),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "GROVE_CONFIG_FILE": str(config / "none.toml"),
        "GROVE_STORE": f"sqlite:///{tmp_path / 'grove.sqlite3'}",
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return values


@pytest.fixture
def joined(
    grove: Grove, store_url: str, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> dict[str, str]:
    """`env` on the module's Grove and its store (where its supervisor writes)."""
    monkeypatch.setenv("GROVE_STORE", store_url)
    return {**env, "GROVE_STORE": store_url}


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["run", *args])
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.3)
    yield server
    server.close()


def assert_nothing_sent(server: socket.socket) -> None:
    with pytest.raises(TimeoutError):
        server.accept()


@pytest.mark.parametrize(
    ("model", "text"),
    [
        ("unknown-model", UNKNOWN_MODEL_TEXT),
        ("claude-sonnet-5-5/maximum", INVALID_THINKING_TEXT),
        ("claude-sonnet-4-5/med", RETIRED_TEXT),
    ],
)
def test_model_errors_print_reference_text_and_send_nothing(
    env: dict[str, str],
    listener: socket.socket,
    monkeypatch: pytest.MonkeyPatch,
    model: str,
    text: str,
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", f"http://127.0.0.1:{listener.getsockname()[1]}")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-used")
    code, out, err = run("--model", model, "hello")
    assert code == 2
    assert err.strip() == text
    assert out == ""
    assert_nothing_sent(listener)


def test_missing_credentials_text_and_nothing_sent(
    env: dict[str, str], listener: socket.socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", f"http://127.0.0.1:{listener.getsockname()[1]}")
    code, _, err = run("--model", "claude-sonnet-5-5/med", "Hello!")
    assert code == 2  # checked before anything starts (cli/preflight.py)
    assert err.strip() == MISSING_ANTHROPIC_TEXT
    assert_nothing_sent(listener)
    assert open_store(env["GROVE_STORE"]).list_agents() == []


def test_missing_credentials_names_each_key_page(env: dict[str, str]) -> None:
    _, _, err = run("--model", "gpt-6.1-terra", "hi")
    assert "https://platform.openai.com/api-keys" in err
    _, _, err = run("--model", "gemini-3.8-flash", "hi")
    assert "https://aistudio.google.com/app/apikey" in err


def test_no_model_configured(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    code, _, err = run("hello")
    assert code == 2
    # The chat's /model hint would not help here; the file named is the one Grove reads.
    assert err.strip() == no_model_flag_text(Path(env["GROVE_CONFIG_FILE"]))
    assert f"(in {env['GROVE_CONFIG_FILE']})" in err
    monkeypatch.delenv("GROVE_CONFIG_FILE")  # then config.toml under $XDG_CONFIG_HOME
    code, _, err = run("hello")
    assert code == 2
    assert f"(in {env['XDG_CONFIG_HOME']}/grove/config.toml)" in err


# The runs come last: with Ray started in this process (the module Grove), a command leaves the
# keys to the hosts it joins (cli/context.py joins_cluster), so the checks above run before.
@pytest.mark.parametrize(
    ("model", "wire_provider"),
    [
        ("claude-haiku-4-5/med", "anthropic"),  # its stream shows the thinking text
        ("gpt-6.1-terra/low", "openai"),
        ("gemini-3.8-flash/high", "google"),
    ],
)
def test_json_output_has_every_field(
    joined: dict[str, str], model: str, wire_provider: str
) -> None:
    code, out, _ = run("--simulate", "--model", model, "--json", "Summarize forks")
    assert code == 0
    document = json.loads(out)
    assert set(document) == {
        "provider",
        "model",
        "thinking",
        "text",
        "thinking_text",
        "tool_calls",
        "tool_results",
        "usage",
        "cost_usd",
        "stop_reason",
        "agent",
    }
    assert document["provider"] == wire_provider
    assert document["text"] and document["thinking_text"]
    assert document["thinking"] == model.split("/")[1]
    assert set(document["usage"]) == {
        "input_tokens",
        "output_tokens",
        "thinking_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
    }
    assert document["usage"]["output_tokens"] > 0 and document["cost_usd"] > 0
    stored = open_store(joined["GROVE_STORE"]).conversation(document["agent"])
    assert [(m.kind, m.content) for m in stored] == [
        ("user", "Summarize forks"),
        ("assistant", document["text"]),
    ]


def test_streams_plain_text(joined: dict[str, str]) -> None:
    code, out, _ = run("--simulate", "--model", "gpt-6.1-terra", '[[sim reply="hello grove"]] hi')
    assert code == 0
    assert out.strip() == "hello grove"


@pytest.mark.parametrize(
    "model", ["claude-sonnet-5-5/none", "claude-opus-5-5/none", "gpt-6.1-sol/none"]
)
def test_none_on_a_model_that_cannot_stop_thinking_runs_with_the_warning(
    joined: dict[str, str], model: str
) -> None:
    """Sonnet 5.5 refuses thinking "disabled" (it is sent between_tools), Opus 5.5 always
    thinks (its lowest effort), GPT-6.1 Sol refuses effort "none" (low): each runs, and says
    so, where the old request was the API's 400."""
    code, out, err = run("--simulate", "--model", model, '[[sim reply="done"]] hi')
    assert code == 0, err
    assert out.strip().endswith("done")  # after any thinking shown
    assert "This model does not support disabling thinking" in err


def test_broken_stream_fails_with_explanation(joined: dict[str, str]) -> None:
    code, _, err = run(
        "--simulate", "--model", "claude-haiku-4-5", "[[sim fault=disconnect after=2]] hi"
    )
    assert code == 1
    assert "stream" in err


def test_a_wait_that_runs_out_is_one_line_and_exit_1(grove: Grove) -> None:
    """A command whose wait for a turn runs out (a slow turn on the simulator, a real wait)
    prints one line saying what did not answer and exits 1: no traceback. No command of
    `grove` waits briefly enough to time out in a test, so the command here is one that only
    waits, under the `grove` app's own group (the one place errors become lines)."""
    root = grove.create_root("claude-haiku-4-5").uuid
    turn = grove.send(root, "[[sim tokens=300 tps=100]] a")
    waiting = typer.Typer(cls=GroveGroup)

    @waiting.callback()
    def options() -> None:
        """A group, as `grove` is, not a lone command."""

    @waiting.command()
    def wait() -> None:
        turn.result(timeout_s=0.2)

    result = CliRunner().invoke(waiting, ["wait"], catch_exceptions=False)
    assert result.exit_code == 1
    assert result.stderr == f"The turn of agent {root} did not end within 0.2 s\n"
    assert turn.result(timeout_s=60).error is None
