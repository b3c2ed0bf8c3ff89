"""A typed answer cannot freeze a host or crash its check: schema patterns run on RE2 (linear
time), so `^(a+)+$`, which backtracks for ever under Python's `re`, answers at once while another
agent of the host keeps streaming; answers are checked off the event loop within a time limit;
an answer nested too deeply, and a schema whose references loop in place, are one line each.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel, field_validator
from ray import cloudpickle

from grove.actors import output as answers
from grove.actors.errors import AnswerError
from grove.actors.output import MAX_ANSWER_DEPTH, OutputType, check_answer, read_answer
from grove.providers.errors import OutputSchemaError
from grove.providers.output_schema import checked_schema
from grove.supervisor import Grove
from tests.integration.groves import largest_gap, running_grove, streaming_beside

CATASTROPHIC = "^(a+)+$"
# Under `re` the check costs about 2**N steps (N=26 took 9 s): enough to stall a host.
TRAP = "a" * 28 + "!"
WORD = {
    "type": "object",
    "properties": {"word": {"type": "string", "pattern": CATASTROPHIC}},
    "required": ["word"],
}
NODE = {
    "type": "object",
    "properties": {"child": {"$ref": "#/$defs/node"}},
    "$defs": {
        "node": {
            "type": "object",
            "properties": {"child": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}},
        }
    },
}
DEEP_TEXT = "The answer is nested more than 64 levels deep; answer with a flatter JSON object."


def nested(depth: int) -> str:
    """JSON text of `depth` objects, each the `child` of the one around it."""
    return '{"child": ' * depth + "{}" + "}" * depth


@pytest.fixture(scope="module")
def grove(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Grove]:
    """One host, so the typed turn and the agent that streams share it."""
    with running_grove(tmp_path_factory.mktemp("store"), hosts=1) as grove:
        yield grove


def test_a_catastrophic_schema_pattern_does_not_stall_the_host(grove: Grove) -> None:
    root = grove.create_root("gpt-5-mini").uuid
    prompt = f"[[sim reply='{json.dumps({'word': TRAP})}']] Name it."
    with streaming_beside(grove) as arrivals:
        result = grove.ask(root, prompt, output_type=WORD, output_retries=0)
    assert result.output_error == (
        f"The answer does not match the schema: /word: '{TRAP}' does not match '{CATASTROPHIC}'."
    )
    assert largest_gap(arrivals) < 2.0  # the stream never stalled while the answer was checked
    fine = grove.ask(root, '[[sim reply=\'{"word": "aaaa"}\']] Again.', output_type=WORD)
    assert fine.output == {"word": "aaaa"}


def test_an_answer_nested_500_deep_in_a_recursive_schema_is_one_line(grove: Grove) -> None:
    root = grove.create_root("gpt-5-mini").uuid
    prompt = f"[[sim reply='{nested(500)}']] Build the tree."
    result = grove.ask(root, prompt, output_type=NODE, output_retries=0)
    assert result.error is None
    assert result.output_error == DEEP_TEXT
    shallow = nested(20)
    fine = grove.ask(root, f"[[sim reply='{shallow}']] Again.", output_type=NODE)
    assert fine.output == json.loads(shallow)


@pytest.mark.parametrize(
    ("schema", "said"),
    [
        (
            {"type": "object", "properties": {"a": {"type": "string", "pattern": "(?=a)b"}}},
            "the output schema's pattern '(?=a)b' at /properties/a is not one RE2 takes "
            "(invalid perl operator: (?=); Grove checks answers with RE2, which has no "
            "backreferences or lookaround",
        ),
        (
            {"type": "object", "patternProperties": {r"(x)\1": {"type": "string"}}},
            r"the output schema's patternProperties '(x)\\1' at / is not one RE2 takes "
            r"(invalid escape sequence: \1); Grove checks answers with RE2, which has no "
            "backreferences or lookaround",
        ),
        (
            {
                "type": "object",
                "properties": {"x": {"$ref": "#/$defs/a"}},
                "$defs": {"a": {"anyOf": [{"$ref": "#/$defs/b"}]}, "b": {"$ref": "#/$defs/a"}},
            },
            "the output schema's $ref '#/$defs/a' leads back to itself without going into a "
            "property or an item of the answer: checking it would never end",
        ),
        (
            {"type": "object", "allOf": [{"$ref": "#"}]},
            "the output schema's $ref '#' leads back to itself without going into a property "
            "or an item of the answer: checking it would never end",
        ),
        (
            {"type": "object", "properties": {"x": {"$ref": "https://example.com/s.json"}}},
            "the output schema's $ref 'https://example.com/s.json' at /properties/x names no "
            "schema in it (Grove resolves only # and #/json/pointer references)",
        ),
        (
            {
                "type": "object",
                "patternProperties": {"^x": {"type": "string"}},
                "unevaluatedProperties": False,
            },
            "the output schema uses unevaluatedProperties beside patternProperties, which Grove "
            "cannot check in linear time; use additionalProperties instead",
        ),
    ],
    ids=["lookahead", "backreference", "loop", "root-loop", "remote", "unevaluated"],
)
def test_schemas_that_cannot_be_checked_safely_are_one_line(
    schema: dict[str, Any], said: str
) -> None:
    with pytest.raises(OutputSchemaError) as refused:
        checked_schema(schema)
    assert str(refused.value) == said


def test_recursive_schemas_that_go_into_the_answer_are_taken() -> None:
    assert checked_schema(NODE) == NODE
    tree = {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}}}
    assert checked_schema(tree) == tree
    output = OutputType.of("tree", checked_schema(tree), 0)
    assert read_answer(json.dumps({"kids": [{"kids": []}]}), output) == {"kids": [{"kids": []}]}


def test_pattern_properties_and_additional_properties_are_checked_by_re2() -> None:
    schema = checked_schema(
        {
            "type": "object",
            "patternProperties": {CATASTROPHIC: {"type": "integer"}},
            "additionalProperties": False,
        }
    )
    output = OutputType.of("keys", schema, 0)
    assert read_answer('{"aaa": 1}', output) == {"aaa": 1}
    with pytest.raises(AnswerError) as caught:
        read_answer(json.dumps({"a" * 200 + "!": 1}), output)
    assert "Additional properties are not allowed" in str(caught.value)
    with pytest.raises(AnswerError, match="/aaa: 'x' is not of type 'integer'"):
        read_answer('{"aaa": "x"}', output)


def test_answers_deeper_than_the_limit_are_refused_before_checking() -> None:
    output = OutputType.of("node", checked_schema(NODE), 0)
    assert read_answer(nested(MAX_ANSWER_DEPTH - 2), output)
    for depth in (MAX_ANSWER_DEPTH, 500, 50_000):
        with pytest.raises(AnswerError) as caught:
            read_answer(nested(depth), output)
        assert str(caught.value) == DEEP_TEXT


class Slow(BaseModel):
    word: str

    @field_validator("word")
    @classmethod
    def slowly(cls, word: str) -> str:
        time.sleep(1.0)
        return word


async def test_checking_runs_off_the_event_loop_within_a_time_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(answers, "CHECK_TIMEOUT_S", 0.3)
    schema = checked_schema(Slow.model_json_schema())
    output = OutputType.of("slow", schema, 0, cloudpickle.dumps(Slow))  # type: ignore[no-untyped-call]
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    ticking = asyncio.ensure_future(tick())
    try:
        with pytest.raises(AnswerError) as caught:
            await check_answer('{"word": "w"}', output)
    finally:
        ticking.cancel()
    assert str(caught.value) == (
        "Checking the answer against the schema took more than 0.3 s; answer with a smaller "
        "JSON object."
    )
    assert ticks >= 10  # the loop ran while the answer was being checked
