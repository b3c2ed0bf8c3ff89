"""Typed results through the Python API on real Ray and the simulator: `ask`, `create_root` and
`fork_many` with a pydantic model (its code shipped to the hosts, its validators run there) or
a JSON schema dict; retries, `invalid_output` kept with its raw text, and schemas refused
before anything is sent.
"""

from __future__ import annotations

from typing import Literal

import pytest
from pydantic import BaseModel, Field, field_validator

from grove.actors.turn_result import TurnResult
from grove.providers.errors import OutputSchemaError
from grove.supervisor import Grove

OPENAI = "gpt-5-mini"
CLAUDE = "claude-haiku-4-5"


class Location(BaseModel):
    file: str
    line: int = Field(ge=1)


class Finding(BaseModel):
    """One problem found in a review."""

    severity: Literal["low", "medium", "high"]
    where: Location
    note: str | None = None

    @field_validator("note")
    @classmethod
    def no_shouting(cls, note: str | None) -> str | None:
        if note is not None and note.isupper() and len(note) > 1:
            raise ValueError("the note must not shout")
        return note


VERDICT = {
    "title": "verdict",
    "type": "object",
    "properties": {
        "ok": {"type": "boolean"},
        "reasons": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["ok"],
}


def forecast(city: str) -> str:
    """The weather in a city."""
    return f"{city}: sunny"


def test_ask_with_a_model_gives_an_instance(grove: Grove) -> None:
    root = grove.create_root(OPENAI)
    result = grove.ask(root.uuid, "Review the patch.", output_type=Finding)
    assert result.ok and isinstance(result.output, Finding), result.output_error
    assert Finding.model_validate_json(result.text) == result.output
    plain = grove.ask(root.uuid, "And now in words.")
    assert plain.output is None and plain.ok


def test_a_root_with_an_output_type_answers_typed_every_turn(grove: Grove) -> None:
    root = grove.create_root(CLAUDE, output_type=VERDICT, tools=[forecast])
    first = grove.ask(root.uuid, '[[sim tool=forecast args=\'{"city": "Oslo"}\' step=1]] Go.')
    assert isinstance(first.output, dict) and isinstance(first.output["ok"], bool)
    kinds = [message.kind for message in grove.history(root.uuid)]
    assert kinds == ["user", "assistant", "tool_result", "assistant"]  # the tool ran first
    assert grove.history(root.uuid)[-1].data["output"] == first.output
    second = grove.ask(root.uuid, "Again.")
    assert isinstance(second.output, dict)


def test_fork_many_retries_and_keeps_what_stayed_malformed(grove: Grove) -> None:
    root = grove.create_root(OPENAI)
    prompts = [
        "Review part 1.",
        "Review part 2. [[sim invalid_output=1]]",
        "Review part 3. [[sim invalid_output=3]]",
    ]
    children = grove.fork_many(root.uuid, prompts, output_type=Finding, output_retries=2)
    results: dict[str, TurnResult | None] = {}
    while len(results) < len(children):
        done = grove.wait_any([c for c in children if c not in results], timeout_s=60)
        results.update(done)
    good, retried, failed = (results[child] for child in children)
    assert good is not None and isinstance(good.output, Finding) and good.output_retries == 0
    assert retried is not None and isinstance(retried.output, Finding)
    assert retried.output_retries == 1 and retried.retry_usage.output_tokens > 0
    assert failed is not None and failed.ok and failed.output is None
    assert failed.output_retries == 2 and failed.output_error
    assert failed.text  # the raw answer is kept
    stored = grove.history(children[2])[-1]
    assert stored.content == failed.text and stored.data["output_error"] == failed.output_error
    kinds = [message.kind for message in grove.history(children[1])]
    assert kinds == ["user", "assistant", "output_retry", "assistant"]


def test_answered_reads_typed_results_back_from_the_store(grove: Grove) -> None:
    root = grove.create_root(OPENAI)
    keys = ["typed-a", "typed-b"]
    children = grove.fork_many(
        root.uuid, ["One.", "Two. [[sim invalid_output=9]]"], output_type=Finding, keys=keys
    )
    for child in children:
        grove.wait_turn(child, timeout_s=60)
    found = grove.answered(keys)
    assert isinstance(found["typed-a"][1].output, Finding)
    assert found["typed-b"][1].output is None and found["typed-b"][1].output_error


def test_schemas_are_refused_before_anything_is_sent(grove: Grove) -> None:
    root = grove.create_root(OPENAI)
    before = len(grove.history(root.uuid))
    free_keys = {
        "type": "object",
        "properties": {"m": {"type": "object", "additionalProperties": True}},
    }
    with pytest.raises(OutputSchemaError, match=r"additionalProperties .* at /properties/m"):
        grove.ask(root.uuid, "Review.", output_type=free_keys)
    with pytest.raises(OutputSchemaError, match="root of an output schema must be an object"):
        grove.fork_many(root.uuid, ["x"], output_type={"type": "array"})
    with pytest.raises(OutputSchemaError, match="pydantic model class or a JSON schema dict"):
        grove.ask(root.uuid, "Review.", output_type=str)  # type: ignore[arg-type]
    assert len(grove.history(root.uuid)) == before
    claude = grove.create_root(CLAUDE)
    assert isinstance(grove.ask(claude.uuid, "Map it.", output_type=free_keys).output, dict)
