"""The vendors' SDKs referee the simulator's structured answers: each asks for a typed answer
its own way (Anthropic `output_config.format` and forced tools, OpenAI Responses and Chat
`json_schema`, Gemini `response_schema`) and parses what comes back; `invalid_output=N` makes
the first N answers malformed, and a strict schema OpenAI would refuse gets its 400.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Literal

import anthropic
import openai
import pytest
from google import genai
from google.genai import errors as genai_errors
from openai.lib._pydantic import to_strict_json_schema
from pydantic import BaseModel, Field, ValidationError

from grove.simulator import SimulatorConfig, SimulatorThread

KEY = "sim-structured-key-7f3a"


class Location(BaseModel):
    file: str
    line: int = Field(ge=1, le=9999)


class Finding(BaseModel):
    """One problem found in a review."""

    severity: Literal["low", "medium", "high"]
    where: Location
    tags: list[str]
    note: str | None = None


STRICT_FINDING = to_strict_json_schema(Finding)


@pytest.fixture(scope="module")
def simulator() -> Iterator[SimulatorThread]:
    with SimulatorThread(SimulatorConfig(api_key=KEY, tokens=8)) as running:
        yield running


# --- Anthropic ----------------------------------------------------------------------------------


def claude(simulator: SimulatorThread) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key=KEY, base_url=simulator.base_url, max_retries=0)


def test_anthropic_parses_output_format(simulator: SimulatorThread) -> None:
    message = claude(simulator).messages.parse(
        model="claude-sonnet-4-6",
        max_tokens=1024,
        messages=[{"role": "user", "content": "Review the patch."}],
        output_format=Finding,
    )
    assert isinstance(message.parsed_output, Finding)
    assert message.stop_reason == "end_turn"


def test_anthropic_streams_output_format(simulator: SimulatorThread) -> None:
    with claude(simulator).messages.stream(
        model="claude-sonnet-4-6",
        max_tokens=1024,
        messages=[{"role": "user", "content": "Review the patch again."}],
        output_format=Finding,
    ) as stream:
        text = "".join(stream.text_stream)
        message = stream.get_final_message()
    assert Finding.model_validate_json(text) == message.parsed_output


def test_anthropic_forced_tool_gets_arguments_of_its_schema(simulator: SimulatorThread) -> None:
    message = claude(simulator).messages.create(
        model="claude-3-7-sonnet-latest",
        max_tokens=1024,
        messages=[{"role": "user", "content": "Review it."}],
        tools=[
            {"name": "lookup", "description": "Look.", "input_schema": {"type": "object"}},
            {
                "name": "final_result",
                "description": "The answer.",
                "input_schema": Finding.model_json_schema(),
            },
        ],
        tool_choice={"type": "tool", "name": "final_result"},
    )
    (call,) = message.content
    assert call.type == "tool_use" and call.name == "final_result"
    Finding.model_validate(call.input)
    assert message.stop_reason == "tool_use"


def test_anthropic_refuses_open_objects(simulator: SimulatorThread) -> None:
    with pytest.raises(anthropic.BadRequestError, match="additionalProperties"):
        claude(simulator).messages.create(
            model="claude-sonnet-4-6",
            max_tokens=1024,
            messages=[{"role": "user", "content": "Review."}],
            output_config={"format": {"type": "json_schema", "schema": {"type": "object"}}},
        )


# --- OpenAI -------------------------------------------------------------------------------------


def gpt(simulator: SimulatorThread) -> openai.OpenAI:
    return openai.OpenAI(api_key=KEY, base_url=simulator.base_url + "/v1", max_retries=0)


def test_openai_responses_parse(simulator: SimulatorThread) -> None:
    response = gpt(simulator).responses.parse(
        model="gpt-5-mini", input="Review the patch.", text_format=Finding
    )
    assert isinstance(response.output_parsed, Finding)
    assert response.text.format.type == "json_schema"  # type: ignore[union-attr]


def test_openai_responses_stream(simulator: SimulatorThread) -> None:
    with gpt(simulator).responses.stream(
        model="gpt-5-mini", input="Review the patch, streaming.", text_format=Finding
    ) as stream:
        deltas = [event.delta for event in stream if event.type == "response.output_text.delta"]
        response = stream.get_final_response()
    assert len(deltas) > 1
    assert Finding.model_validate_json("".join(deltas)) == response.output_parsed


def test_openai_chat_parse_and_stream(simulator: SimulatorThread) -> None:
    client = gpt(simulator)
    completion = client.chat.completions.parse(
        model="gpt-5-mini",
        messages=[{"role": "user", "content": "Review the patch."}],
        response_format=Finding,
    )
    assert isinstance(completion.choices[0].message.parsed, Finding)
    with client.chat.completions.stream(
        model="gpt-5-mini",
        messages=[{"role": "user", "content": "Review the patch, streaming."}],
        response_format=Finding,
    ) as stream:
        final = stream.get_final_completion()
    assert isinstance(final.choices[0].message.parsed, Finding)


def test_openai_refuses_a_schema_strict_mode_cannot_take(simulator: SimulatorThread) -> None:
    loose = {"type": "object", "properties": {"a": {"type": "string"}}}
    with pytest.raises(openai.BadRequestError, match="additionalProperties"):
        gpt(simulator).responses.create(  # type: ignore[call-overload]
            model="gpt-5-mini",
            input="Hi.",
            text={
                "format": {"type": "json_schema", "name": "loose", "schema": loose, "strict": True}
            },
        )


def test_invalid_output_makes_the_first_answers_malformed(simulator: SimulatorThread) -> None:
    client = gpt(simulator)
    history: list[dict[str, str]] = [
        {"role": "user", "content": "Review. [[sim invalid_output=2]]"}
    ]
    answers = []
    for _ in range(3):
        completion = client.chat.completions.create(  # type: ignore[call-overload]
            model="gpt-5-mini",
            messages=history,
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "finding", "schema": STRICT_FINDING, "strict": True},
            },
        )
        text = completion.choices[0].message.content or ""
        answers.append(text)
        history += [
            {"role": "assistant", "content": text},
            {"role": "user", "content": "That did not match the schema; try again."},
        ]
    for malformed in answers[:2]:
        with pytest.raises((ValidationError, ValueError)):
            Finding.model_validate(json.loads(malformed))
    Finding.model_validate_json(answers[2])


# --- Gemini -------------------------------------------------------------------------------------


def gemini(simulator: SimulatorThread) -> genai.Client:
    """A new client; callers keep it in a variable, since a dropped one closes its pool."""
    return genai.Client(
        api_key=KEY,
        http_options={"base_url": simulator.base_url, "retry_options": {"attempts": 1}},
    )


def test_gemini_parses_response_schema(simulator: SimulatorThread) -> None:
    client = gemini(simulator)
    response = client.models.generate_content(
        model="gemini-3.0-flash",
        contents="Review the patch.",
        config={"response_mime_type": "application/json", "response_schema": Finding},
    )
    assert isinstance(response.parsed, Finding)


def test_gemini_streams_response_json_schema(simulator: SimulatorThread) -> None:
    client = gemini(simulator)
    chunks = client.models.generate_content_stream(
        model="gemini-3.0-flash",
        contents="Review the patch, streaming.",
        config={
            "response_mime_type": "application/json",
            "response_json_schema": Finding.model_json_schema(),
        },
    )
    text = "".join(chunk.text or "" for chunk in chunks)
    Finding.model_validate_json(text)


def test_gemini_2_5_refuses_json_answers_with_functions(simulator: SimulatorThread) -> None:
    client = gemini(simulator)
    with pytest.raises(genai_errors.ClientError, match="unsupported"):
        client.models.generate_content(
            model="gemini-2.5-flash-lite",
            contents="Review.",
            config={
                "response_mime_type": "application/json",
                "response_json_schema": Finding.model_json_schema(),
                "tools": [{"function_declarations": [{"name": "lookup", "description": "L."}]}],
            },
        )
