"""Loaded credentials are masked by their exact value, whatever they look like: against a server
that echoes the key (and a base URL's password, decoded and as the Basic auth header carries
it) in its 401 body, on all three wires, neither reaches the output, the store (with its WAL),
the event log or a batch's output.
"""

from __future__ import annotations

import base64
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from grove.providers.secrets import MASK, MIN_SECRET_CHARS, Secrets, mask, remember_url_secrets
from tests.integration.groves import FAST_RETRIES, invoke
from tests.security.commands import Place
from tests.security.echo_server import EchoServer

PLAIN_KEY = "CANARYPLAINKEY0123456789"
HEX_KEY = secrets.token_hex(16)
OPENAI_KEY = "CANARYOPENAI" + secrets.token_hex(8)
URL_PASSWORD = "CANARYURLSECRET" + secrets.token_hex(4)
BASIC_AUTH = base64.b64encode(f"grove:{URL_PASSWORD}".encode()).decode()  # what is sent
CANARIES = (PLAIN_KEY, HEX_KEY, OPENAI_KEY, URL_PASSWORD, BASIC_AUTH)
MODELS = ("claude-haiku-4-5", "gpt-5-mini", "gemini-3.0-flash")


@pytest.fixture(scope="module")
def echo() -> Iterator[EchoServer]:
    with EchoServer() as server:
        yield server


def keyed(place: Place, echo: EchoServer) -> dict[str, str]:
    base = f"http://grove:{URL_PASSWORD}@127.0.0.1:{echo.port}"
    return {
        "ANTHROPIC_API_KEY": PLAIN_KEY,
        "OPENAI_API_KEY": OPENAI_KEY,
        "GEMINI_API_KEY": HEX_KEY,
        "ANTHROPIC_BASE_URL": base,
        "OPENAI_BASE_URL": base + "/v1",
        "GOOGLE_GEMINI_BASE_URL": base,
    }


def leaked(data: bytes | str) -> list[str]:
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    return [canary for canary in CANARIES if canary in text]


def test_echoed_keys_and_url_passwords_reach_no_output_store_log_or_batch(
    place: Place, echo: EchoServer
) -> None:
    env = keyed(place, echo)
    outputs: list[str] = []
    for model in MODELS:
        done = place.grove("run", "--model", model, "hello", **env)
        assert done.returncode != 0, done.stdout
        assert "401" in done.stderr or "authentication" in done.stderr.lower(), done.stderr
        assert MASK in done.stdout + done.stderr, done.stderr  # the echo came back, masked
        outputs += [done.stdout, done.stderr]
    tasks = place.base / "tasks.jsonl"
    tasks.write_text("".join(f'{{"id": "{m}", "prompt": "hi", "model": "{m}"}}\n' for m in MODELS))
    batch_output = place.base / "results.jsonl"
    done = place.grove("batch", str(tasks), "--hosts", "1", "--output", str(batch_output), **env)
    outputs += [done.stdout, done.stderr]
    events = invoke(place.env, "events")  # a read of the store, in this process
    assert events.returncode == 0 and "TurnCompleted" in events.stdout
    outputs.append(events.stdout)
    assert batch_output.read_text().count("401") >= 3
    store = Path(place.env["GROVE_STORE"].removeprefix("sqlite:///"))
    files = [store, *store.parent.glob(store.name + "-*"), batch_output]
    assert leaked("".join(outputs)) == []
    assert {str(path): leaked(path.read_bytes()) for path in files} == {
        str(path): [] for path in files
    }


def test_a_url_password_is_shown_nowhere_a_connection_fails(place: Place) -> None:
    unreachable = f"http://grove:{URL_PASSWORD}@127.0.0.1:9/"
    env = {"OPENAI_API_KEY": OPENAI_KEY, "OPENAI_BASE_URL": unreachable, **FAST_RETRIES}
    done = place.grove("run", "--model", "gpt-5-mini", "hi", **env)
    assert done.returncode != 0
    assert leaked(done.stdout + done.stderr) == []
    assert done.stderr.count("; retrying in ") == 5  # every attempt's failure was shown too
    assert "127.0.0.1:9" in done.stderr


@given(
    st.lists(st.text(min_size=MIN_SECRET_CHARS, max_size=24), min_size=1, max_size=4),
    st.text(max_size=40),
)
def test_masked_text_never_holds_a_remembered_secret(values: list[str], filler: str) -> None:
    registry = Secrets()  # not the process's own: these values are no one's keys
    for value in values:
        registry.remember(value)
    # Secrets side by side, nested in each other's text, around arbitrary text.
    text = filler.join(values) + "".join(values) + filler
    masked = registry.mask(text)
    for value in values:
        assert value not in masked or value in registry.mask(value)  # only where masking made it


def test_exact_values_shapes_and_url_user_info_are_masked() -> None:
    registry = Secrets()
    registry.remember("plainvalue-123456")
    registry.remember("shortie")  # too short to hide everywhere
    text = (
        "bad key plainvalue-123456 and sk-ant-api03-abcdef and "
        "AIzaSyA1234567890123456789012345678901 at https://me:pw@host.test/v1 shortie"
    )
    assert registry.mask(text) == ("bad key *** and sk-*** and *** at https://host.test/v1 shortie")


def test_the_basic_auth_value_of_a_url_is_masked_as_sent_and_as_written() -> None:
    remember_url_secrets("http://us%40er:p%40ss-canary-8d2f@host.test/v1")
    for user, password in (("us@er", "p@ss-canary-8d2f"), ("us%40er", "p%40ss-canary-8d2f")):
        basic = base64.b64encode(f"{user}:{password}".encode()).decode()
        assert mask(f"echoed: Basic {basic}") == "echoed: Basic ***"


def test_configured_headers_and_server_environments_are_never_in_a_repr() -> None:
    """An MCP server's env and headers, and the telemetry table's headers, hold tokens: a
    settings object written into a log line or an error text must not carry them."""
    from grove.actors.tools.mcp import McpServerConfig
    from grove.supervisor.config_service import TelemetrySection
    from grove.supervisor.config_tools import McpServerSection

    token = "CANARYHEADER" + secrets.token_hex(8)
    shown = [
        McpServerConfig(
            name="s",
            timeout_s=1.0,
            startup_timeout_s=1.0,
            command="srv",
            env=(("SRV_TOKEN", token),),
            headers=(("authorization", token),),
        ),
        McpServerSection(command="srv", env={"SRV_TOKEN": token}),
        McpServerSection(url="https://mcp.example", headers={"authorization": token}),
        TelemetrySection(headers={"authorization": token}),
    ]
    for value in shown:
        assert token not in repr(value) and token not in str(value)
