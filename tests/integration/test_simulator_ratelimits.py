"""`grove simulate --rpm N --tpm N`: over the limits each provider answers 429 with its own
body and headers, and every answer says what is left; the official SDKs read all of it."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import anthropic
import openai
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types as genai_types

from grove.simulator import SimulatorConfig, SimulatorThread
from tests.conformance.corpus import REPO_ROOT

KEY = "sim-ratelimit-key-4c2f"


@pytest.fixture
def simulator() -> Iterator[SimulatorThread]:
    with SimulatorThread(SimulatorConfig(api_key=KEY, rpm=2, tokens=3)) as running:
        yield running


def test_anthropic_counts_down_then_answers_429_with_retry_after(
    simulator: SimulatorThread,
) -> None:
    client = anthropic.Anthropic(api_key=KEY, base_url=simulator.base_url, max_retries=0)
    raised: anthropic.RateLimitError | None = None
    first = client.messages.with_raw_response.create(
        model="claude-haiku-4-5", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
    )
    assert first.headers["anthropic-ratelimit-requests-limit"] == "2"
    assert first.headers["anthropic-ratelimit-requests-remaining"] == "1"
    assert first.headers["anthropic-ratelimit-requests-reset"].endswith("Z")
    for _ in range(2):  # the second is over the limit
        try:
            client.messages.create(
                model="claude-haiku-4-5",
                max_tokens=10,
                messages=[{"role": "user", "content": "hi"}],
            )
        except anthropic.RateLimitError as exc:
            raised = exc
    assert raised is not None
    assert float(raised.response.headers["retry-after"]) > 0
    assert raised.response.headers["anthropic-ratelimit-requests-remaining"] == "0"


def test_openai_answers_429_with_its_headers(simulator: SimulatorThread) -> None:
    client = openai.OpenAI(api_key=KEY, base_url=simulator.base_url + "/v1", max_retries=0)
    first = client.chat.completions.with_raw_response.create(
        model="gpt-5-mini", messages=[{"role": "user", "content": "hi"}]
    )
    assert first.headers["x-ratelimit-limit-requests"] == "2"
    assert first.headers["x-ratelimit-remaining-requests"] == "1"
    assert first.headers["x-ratelimit-reset-requests"].endswith(("ms", "s"))
    client.responses.create(model="gpt-5-mini", input="hi")
    with pytest.raises(openai.RateLimitError) as raised:
        client.responses.create(model="gpt-5-mini", input="hi")
    assert raised.value.code == "rate_limit_exceeded"
    assert raised.value.response.headers["x-ratelimit-remaining-requests"] == "0"


def test_gemini_answers_resource_exhausted_with_a_retry_delay(simulator: SimulatorThread) -> None:
    client = genai.Client(
        api_key=KEY, http_options=genai_types.HttpOptions(base_url=simulator.base_url)
    )
    for _ in range(2):
        client.models.generate_content(model="gemini-2.5-flash-lite", contents="hi")
    with pytest.raises(genai_errors.ClientError) as raised:
        client.models.generate_content(model="gemini-2.5-flash-lite", contents="hi")
    assert raised.value.code == 429 and raised.value.status == "RESOURCE_EXHAUSTED"
    details = raised.value.details["error"]["details"]
    assert details[0]["@type"] == "type.googleapis.com/google.rpc.RetryInfo"


def test_the_command_line_takes_the_limits_and_refuses_bad_ones() -> None:
    refused = subprocess.run(
        [sys.executable, "-m", "grove.cli.app", "simulate", "--rpm", "0"],
        capture_output=True, text=True, cwd=REPO_ROOT, timeout=60, check=False,
    )  # fmt: skip
    assert refused.returncode == 2 and "--rpm" in refused.stderr
