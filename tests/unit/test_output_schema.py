"""Output schemas: the neutral checks, each provider's dialect (OpenAI strict mode made the way
OpenAI documents: closed objects, every property required, the optional ones nullable), the
simulator's JSON made from a schema and its malformed answers. Fuzzed with hypothesis.
"""

from __future__ import annotations

import json
import string
import tempfile
from pathlib import Path
from typing import Any, Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from pydantic import BaseModel, Field

from grove.providers.base import OutputSchema, Request
from grove.providers.errors import OutputSchemaError
from grove.providers.output import answer_message, output_mode
from grove.providers.output_dialects import for_provider, provider_refusal, without_optional_nulls
from grove.providers.output_schema import checked_schema
from grove.simulator.schema_json import json_for, malformed_for
from grove.simulator.schema_rules import closed_objects_problem, strict_problem
from grove.supervisor.output_files import schema_file

NAMES = st.text(string.ascii_lowercase, min_size=1, max_size=6)
SEEDS = st.text(max_size=8)


def scalars(constrained: bool) -> st.SearchStrategy[dict[str, Any]]:
    """Scalar schemas; `constrained` adds the constraints strict mode only notes (lengths)."""
    plain = st.one_of(
        st.just({"type": "string"}),
        st.sampled_from(["date", "date-time", "email", "uuid"]).map(
            lambda f: {"type": "string", "format": f}
        ),
        st.integers(-50, 50).flatmap(
            lambda low: st.integers(low, low + 30).map(
                lambda high: {"type": "integer", "minimum": low, "maximum": high}
            )
        ),
        st.just({"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1}),
        st.just({"type": "integer", "multipleOf": 5, "minimum": 1}),
        st.just({"type": "boolean"}),
        st.lists(NAMES, min_size=1, max_size=4, unique=True).map(
            lambda values: {"type": "string", "enum": values}
        ),
        st.just({"const": "fixed"}),
        st.just({"type": ["string", "null"]}),
    )
    if not constrained:
        return plain
    return st.one_of(
        plain,
        st.integers(0, 12).map(lambda n: {"type": "string", "minLength": n, "maxLength": n + 5}),
        st.just({"type": "array", "items": {"type": "integer"}, "uniqueItems": True}),
    )


def schemas(constrained: bool = False) -> st.SearchStrategy[dict[str, Any]]:
    """Object-rooted schemas: nested objects with optional properties, arrays with bounds,
    anyOf and nullable unions, described nodes."""

    def extend(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
        return st.one_of(
            objects(children),
            st.tuples(children, st.integers(0, 2), st.integers(0, 3)).map(
                lambda t: {
                    "type": "array",
                    "items": t[0],
                    "minItems": t[1],
                    "maxItems": t[1] + t[2],
                }
            ),
            st.lists(children, min_size=2, max_size=3).map(lambda items: {"anyOf": items}),
            children.map(lambda child: {"anyOf": [child, {"type": "null"}]}),
            children.map(lambda child: {**child, "description": "described"}),
        )

    nodes = st.recursive(scalars(constrained), extend, max_leaves=8)
    return objects(nodes)


def objects(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    return st.dictionaries(NAMES, children, min_size=1, max_size=4).flatmap(
        lambda properties: st.lists(st.sampled_from(sorted(properties)), unique=True).map(
            lambda required: {"type": "object", "properties": properties, "required": required}
        )
    )


def valid(schema: dict[str, Any], value: Any) -> bool:
    return bool(Draft202012Validator(schema).is_valid(value))


FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(schemas(), SEEDS)
def test_strict_answers_read_back_under_the_schema_as_given(
    schema: dict[str, Any], seed: str
) -> None:
    """What OpenAI's strict mode would accept (the simulator's own rules say the converted
    schema is strict) is, with the nulls of optional properties dropped, valid as given."""
    checked = checked_schema(schema)
    strict = for_provider(checked, "openai")
    assert strict_problem(strict) is None
    Draft202012Validator.check_schema(strict)
    answer = json_for(strict, seed)
    assert valid(strict, answer)
    assert valid(schema, without_optional_nulls(answer, checked))


@FUZZ
@given(schemas(constrained=True), SEEDS)
def test_json_made_from_a_schema_is_valid_and_malformed_json_is_not(
    schema: dict[str, Any], seed: str
) -> None:
    assert valid(schema, json_for(schema, seed))
    text = malformed_for(schema, seed, as_object=False)
    try:
        value = json.loads(text)
    except ValueError:
        return
    assert not valid(schema, value)


@FUZZ
@given(schemas(constrained=True))
def test_each_provider_takes_a_checked_schema(schema: dict[str, Any]) -> None:
    checked = checked_schema(schema)
    anthropic = for_provider(checked, "anthropic")
    assert closed_objects_problem(anthropic, "schema") is None
    Draft202012Validator.check_schema(for_provider(checked, "google"))
    strict = for_provider(checked, "openai")
    assert strict_problem(strict) is None


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(JSON)
def test_any_json_is_an_output_schema_or_one_line_of_why_not(value: Any) -> None:
    for provider in ("openai", "anthropic", "google"):
        try:
            for_provider(checked_schema(value), provider)
        except OutputSchemaError as exc:
            assert "\n" not in str(exc)


@pytest.mark.parametrize(
    ("schema", "named"),
    [
        (
            {"type": "object", "properties": {"a": {"not": {"type": "string"}}}},
            "uses not at /properties/a",
        ),
        (
            {"type": "object", "patternProperties": {"^x": {"type": "string"}}},
            "uses patternProperties at /",
        ),
        (
            {
                "type": "object",
                "properties": {"m": {"type": "object", "additionalProperties": {"type": "string"}}},
            },
            "uses additionalProperties (an object with free keys) at /properties/m",
        ),
        (
            {
                "type": "object",
                "properties": {"a": {"allOf": [{"type": "string"}, {"minLength": 1}]}},
            },
            "uses allOf (with more than one schema) at /properties/a",
        ),
        (
            {
                "type": "object",
                "properties": {"t": {"type": "array", "prefixItems": [{"type": "string"}]}},
            },
            "uses prefixItems at /properties/t",
        ),
    ],
)
def test_strict_mode_refuses_naming_the_keyword(schema: dict[str, Any], named: str) -> None:
    refusal = provider_refusal(checked_schema(schema), "openai")
    assert refusal is not None and named in refusal and "OpenAI's strict mode" in refusal
    assert provider_refusal(checked_schema(schema), "google") is None


@pytest.mark.parametrize(
    ("given_schema", "problem"),
    [
        (
            {"type": "array", "items": {"type": "string"}},
            "the root of an output schema must be an object",
        ),
        ({"type": "object", "properties": {"a": {"type": "strin"}}}, "not a valid JSON Schema"),
        (["type", "object"], "an output schema is a JSON object, not list"),
    ],
)
def test_schemas_grove_cannot_use(given_schema: Any, problem: str) -> None:
    with pytest.raises(OutputSchemaError, match=problem):
        checked_schema(given_schema)


class Location(BaseModel):
    file: str
    line: int = Field(ge=1)


class Finding(BaseModel):
    severity: Literal["low", "high"]
    where: Location
    label: str = Field("none", min_length=2)
    note: str | None = None


class Node(BaseModel):
    name: str
    children: list[Node] = []


def test_strict_schema_of_a_pydantic_model() -> None:
    strict = for_provider(checked_schema(Finding.model_json_schema()), "openai")
    assert strict["required"] == ["severity", "where", "label", "note"]
    assert strict["additionalProperties"] is False
    assert strict["properties"]["label"] == {
        "title": "Label",
        "type": ["string", "null"],
        "description": "(minLength=2)",
    }
    assert strict["$defs"]["Location"]["additionalProperties"] is False
    answer = {"severity": "low", "where": {"file": "a.py", "line": 3}, "label": None, "note": None}
    read = Finding.model_validate(without_optional_nulls(answer, Finding.model_json_schema()))
    assert read.label == "none" and read.note is None


def test_a_recursive_model_is_inlined_at_the_root() -> None:
    checked = checked_schema(Node.model_json_schema())
    assert checked["type"] == "object" and "$defs" not in checked
    assert checked["properties"]["children"]["items"] == {"$ref": "#"}
    strict = for_provider(checked, "openai")
    assert strict_problem(strict) is None
    Node.model_validate(without_optional_nulls(json_for(strict, "tree"), checked))
    with pytest.raises(OutputSchemaError, match="recursive"):
        for_provider(checked, "anthropic")


def request(model: str, schema: dict[str, Any], tools: bool = False) -> Request:
    from grove.providers.base import ToolSpec

    return Request(
        model=model,
        messages=(),
        tools=(ToolSpec(name="read", description="Read.", parameters={"type": "object"}),)
        if tools
        else (),
        output=OutputSchema(name="finding", schema=checked_schema(schema)),
    )


def test_the_catalog_chooses_native_or_a_final_tool() -> None:
    finding = Finding.model_json_schema()
    assert output_mode("anthropic", request("claude-sonnet-4-5", finding)) == "native"
    assert output_mode("anthropic", request("claude-sonnet-4-5-20250929", finding)) == "native"
    assert output_mode("anthropic", request("claude-3-7-sonnet-latest", finding)) == "tool"
    assert (
        output_mode("anthropic", request("claude-sonnet-4-5", Node.model_json_schema())) == "tool"
    )
    assert output_mode("google", request("gemini-2.5-flash", finding)) == "native"
    assert output_mode("google", request("gemini-2.5-flash", finding, tools=True)) == "tool"
    assert output_mode("google", request("gemini-3.0-flash", finding, tools=True)) == "native"
    assert output_mode("openai", request("gpt-5-mini", finding, tools=True)) == "native"


def test_an_answer_through_the_final_tool_becomes_text() -> None:
    from grove.providers.base import Message, TextPart, ThinkingPart, ToolCallPart

    reply = Message(
        role="assistant",
        parts=(
            ThinkingPart(text="hm"),
            TextPart(text="Here it is."),
            ToolCallPart(call_id="c1", name="final_result", arguments={"severity": "low"}),
        ),
    )
    answer = answer_message(reply)
    assert [part.kind for part in answer.parts] == ["thinking", "text"]
    assert answer.text == '{"severity": "low"}'
    plain = Message(role="assistant", parts=(TextPart(text="{}"),))
    assert answer_message(plain) is plain


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=300) | JSON.map(lambda value: json.dumps(value).encode()))
def test_any_file_is_an_output_schema_or_one_line_naming_it(data: bytes) -> None:
    """`--output-schema FILE`: whatever the file holds, a checked schema or one line that
    names the file."""
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "schema.json"
        path.write_bytes(data)
        try:
            schema = schema_file(path, ["openai", "anthropic", "google"])
        except OutputSchemaError as exc:
            assert "\n" not in str(exc) and str(path) in str(exc)
        else:
            assert checked_schema(schema) == schema
