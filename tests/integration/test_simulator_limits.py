"""The simulator plays the long-session cases, refereed by the vendors' SDKs: a request over
the context window gets each provider's own context-length error, and `stop=length` ends a
reply as one cut off by its output limit, with each wire's own reason.
"""

from __future__ import annotations

from collections.abc import Iterator

import anthropic
import openai
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types as genai_types

from grove.simulator import SimulatorConfig, SimulatorThread

KEY = "sim-limits-key-7d1e"
WINDOW = 300
LONG = "words " * 2_000  # about 3,000 tokens: over the window
CUT = "[[sim stop=length tokens=5]] go on"


@pytest.fixture(scope="module")
def simulator() -> Iterator[SimulatorThread]:
    with SimulatorThread(SimulatorConfig(api_key=KEY, context_window=WINDOW)) as running:
        yield running


def claude(simulator: SimulatorThread) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key=KEY, base_url=simulator.base_url, max_retries=0)


def gpt(simulator: SimulatorThread) -> openai.OpenAI:
    return openai.OpenAI(api_key=KEY, base_url=simulator.base_url + "/v1", max_retries=0)


def gemini(simulator: SimulatorThread) -> genai.Client:
    options = genai_types.HttpOptions(base_url=simulator.base_url)
    return genai.Client(api_key=KEY, http_options=options)


def test_anthropic_over_the_window_and_cut_off(simulator: SimulatorThread) -> None:
    with pytest.raises(anthropic.BadRequestError) as raised:
        claude(simulator).messages.create(
            model="claude-haiku-4-5", max_tokens=100, messages=[{"role": "user", "content": LONG}]
        )
    error = raised.value.body["error"]  # type: ignore[index]
    assert error["type"] == "invalid_request_error"
    assert error["message"].startswith("prompt is too long: ")
    assert error["message"].endswith(f" tokens > {WINDOW} maximum")
    with claude(simulator).messages.stream(
        model="claude-haiku-4-5", max_tokens=100, messages=[{"role": "user", "content": CUT}]
    ) as stream:
        message = stream.get_final_message()
    assert message.stop_reason == "max_tokens" and message.usage.output_tokens == 5


def test_a_prompt_past_the_maximum_input_is_refused_within_the_window() -> None:
    """GPT-6 takes 922K of its 1.05M window as input: a prompt of about 975K tokens is the
    context-length error the SDK reads, though it is within the window."""
    text = "words " * 650_000
    with (
        SimulatorThread(SimulatorConfig(api_key=KEY)) as running,
        pytest.raises(openai.BadRequestError) as raised,
    ):
        gpt(running).chat.completions.create(
            model="gpt-6-sol", messages=[{"role": "user", "content": text}]
        )
    assert raised.value.code == "context_length_exceeded"
    assert "maximum context length is 922000 tokens" in raised.value.message


def test_openai_chat_over_the_window_and_cut_off(simulator: SimulatorThread) -> None:
    with pytest.raises(openai.BadRequestError) as raised:
        gpt(simulator).chat.completions.create(
            model="gpt-5-mini", messages=[{"role": "user", "content": LONG}]
        )
    assert raised.value.code == "context_length_exceeded"
    assert f"maximum context length is {WINDOW} tokens" in raised.value.message
    chunks = list(
        gpt(simulator).chat.completions.create(
            model="gpt-5-mini", messages=[{"role": "user", "content": CUT}], stream=True
        )
    )
    reasons = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert reasons[-1] == "length"


def test_openai_responses_over_the_window_and_incomplete(simulator: SimulatorThread) -> None:
    with pytest.raises(openai.BadRequestError) as raised:
        gpt(simulator).responses.create(model="gpt-5-mini", input=LONG)
    assert raised.value.code == "context_length_exceeded"
    assert raised.value.param == "input"
    # As with the real API, the stream ends in `response.incomplete` (the SDK's
    # get_final_response wants `response.completed`, so the last event is read instead).
    with gpt(simulator).responses.stream(model="gpt-5-mini", input=CUT) as stream:
        events = list(stream)
    assert events[-1].type == "response.incomplete"
    response = events[-1].response
    assert response.status == "incomplete"
    assert response.incomplete_details is not None
    assert response.incomplete_details.reason == "max_output_tokens"
    whole = gpt(simulator).responses.create(model="gpt-5-mini", input=CUT)
    assert whole.status == "incomplete"


def test_gemini_over_the_window_and_max_tokens(simulator: SimulatorThread) -> None:
    client = gemini(simulator)
    with pytest.raises(genai_errors.ClientError) as raised:
        client.models.generate_content(model="gemini-2.5-flash-lite", contents=LONG)
    assert raised.value.code == 400 and raised.value.status == "INVALID_ARGUMENT"
    assert f"exceeds the maximum number of tokens allowed ({WINDOW})" in str(raised.value.message)
    chunks = list(
        client.models.generate_content_stream(model="gemini-2.5-flash-lite", contents=CUT)
    )
    last = chunks[-1]
    assert last.candidates is not None
    assert last.candidates[0].finish_reason == genai_types.FinishReason.MAX_TOKENS
    whole = client.models.generate_content(model="gemini-2.5-flash-lite", contents=CUT)
    assert whole.candidates is not None
    assert whole.candidates[0].finish_reason == genai_types.FinishReason.MAX_TOKENS


def test_the_catalog_window_applies_without_an_override() -> None:
    with SimulatorThread(SimulatorConfig(api_key=KEY)) as running:
        client = claude(running)
        reply = client.messages.create(
            model="claude-haiku-4-5", max_tokens=256, messages=[{"role": "user", "content": LONG}]
        )
        assert reply.stop_reason == "end_turn"  # 3,000 tokens fit in 200,000
        with pytest.raises(anthropic.BadRequestError, match="prompt is too long"):
            client.messages.create(
                model="claude-haiku-4-5",
                max_tokens=10,
                messages=[{"role": "user", "content": "words " * 810_000}],
            )


def test_a_bad_stop_value_is_a_precise_error(simulator: SimulatorThread) -> None:
    with pytest.raises(anthropic.BadRequestError, match="stop must be length; got 'end'"):
        claude(simulator).messages.create(
            model="claude-haiku-4-5",
            max_tokens=10,
            messages=[{"role": "user", "content": "[[sim stop=end]] hi"}],
        )
