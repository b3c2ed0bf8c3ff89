"""`grove batch` input parsing: every rule with its exact message, and fuzzing that shows the
parser raises nothing but `TaskLineError` and says precisely what is wrong with a line."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from grove.supervisor.batch.tasks import (
    MAX_TEXT_BYTES,
    ContextError,
    Task,
    TaskLineError,
    id_key,
    parse_task_line,
    read_context,
    read_tasks,
    schema_refusal,
    task_json,
)

ALIASES = {"fast": "gemini-3.0-flash/low"}
VERDICT = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
FREE_KEYS = {
    "type": "object",
    "properties": {"tags": {"type": "object", "additionalProperties": True}},
}


def line_error(text: str, line: int = 1) -> str:
    with pytest.raises(TaskLineError) as caught:
        parse_task_line(text, line, ALIASES)
    assert caught.value.line == line
    assert str(caught.value) == f"line {line}: {caught.value.message}"
    return caught.value.message


def test_a_full_task_is_read_with_its_model_resolved() -> None:
    task = parse_task_line(
        '{"id": "a-1", "prompt": "Review this", "model": "fast", "system": "Be brief"}', 4, ALIASES
    )
    assert task == Task(
        id="a-1",
        key="a-1",
        line=4,
        prompt="Review this",
        model="gemini-3.0-flash/low",
        system="Be brief",
    )


def test_numbers_are_ids_compared_by_their_text() -> None:
    task = parse_task_line('{"id": 7, "prompt": "x", "model": null, "system": null}', 1)
    assert task is not None
    assert (task.id, task.key, task.model, task.system) == (7, "7", None, None)
    assert id_key(7) == id_key("7") == "7"
    assert id_key(2.5) == "2.5"


def test_blank_lines_are_not_tasks() -> None:
    assert parse_task_line("", 1) is None
    assert parse_task_line("  \t ", 2) is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "not valid JSON: Expecting property name enclosed in double quotes at column 2"),
        ('{"id": 1, "prompt": "x"} x', "not valid JSON: Extra data at column 26"),
        ('{"id": NaN, "prompt": "x"}', "NaN is not a JSON number"),
        ('{"id": 1, "id": 2, "prompt": "x"}', "field 'id' appears twice"),
        ("[1, 2]", "a task must be a JSON object, not an array"),
        ('"hello"', "a task must be a JSON object, not a string"),
        ("null", "a task must be a JSON object, not null"),
        ('{"prompt": "x"}', "missing required field 'id'"),
        ('{"id": 1}', "missing required field 'prompt'"),
        ("{}", "missing required field 'id'; missing required field 'prompt'"),
        ('{"id": true, "prompt": "x"}', "'id' must be a string or a number, not a boolean"),
        ('{"id": [1], "prompt": "x"}', "'id' must be a string or a number, not an array"),
        ('{"id": "", "prompt": "x"}', "'id' is an empty string"),
        ('{"id": 1e999, "prompt": "x"}', "'id' must be a finite number"),
        ('{"id": 1, "prompt": 5}', "'prompt' must be a string, not a number"),
        ('{"id": 1, "prompt": "  "}', "'prompt' is empty"),
        (
            '{"id": 1, "prompt": "\\ud800"}',
            "'prompt' contains an unpaired surrogate (\\ud800), not valid UTF-8",
        ),
        ('{"id": 1, "prompt": "x", "model": 3}', "'model' must be a string, not a number"),
        ('{"id": 1, "prompt": "x", "model": ""}', "'model' is empty"),
        ('{"id": 1, "prompt": "x", "system": {}}', "'system' must be a string, not an object"),
        (
            '{"id": 1, "prompt": "x", "sytem": "s", "meta": 1}',
            "unknown fields 'sytem', 'meta' (a task has id, prompt, model, system, schema, tier)",
        ),
        (
            '{"id": 1, "prompt": "x", "model": "claude-sonnet-4-5/max"}',
            "'model': Invalid thinking level: max\nValid levels: none, low, med, high",
        ),
        (
            '{"id": 1, "prompt": "x", "tier": "cheap"}',
            "'tier' must be one of standard, flex, batch, not \"cheap\"",
        ),
        (
            '{"id": 1, "prompt": "x", "tier": 2}',
            "'tier' must be one of standard, flex, batch, not 2",
        ),
        (
            '{"id": 1, "prompt": "x", "schema": "s"}',
            "'schema' must be a JSON schema object, not a string",
        ),
        (
            '{"id": 1, "prompt": "x", "schema": {"type": "array"}}',
            "'schema': the root of an output schema must be an object "
            '({"type": "object", "properties": {...}}); put a list or a value in a property of one',
        ),
        (
            '{"id": 1, "prompt": "x", "schema": {"type": "object", "required": 3}}',
            "'schema': the output schema is not a valid JSON Schema: 3 is not of type 'array' "
            "(at /required)",
        ),
        (
            f'{{"id": 1, "prompt": "x", "model": "gpt-5-mini", "schema": {json.dumps(FREE_KEYS)}}}',
            "'schema': the output schema uses additionalProperties (an object with free keys) at "
            "/properties/tags, which OpenAI's strict mode cannot take; list its keys as "
            "properties, or use another provider",
        ),
    ],
)
def test_each_malformed_line_gets_its_precise_message(text: str, message: str) -> None:
    assert line_error(text, 9) == message


def test_a_task_tier_goes_with_the_task() -> None:
    task = parse_task_line(json.dumps({"id": 1, "prompt": "x", "tier": "flex"}), 1, ALIASES)
    assert task is not None and task.tier == "flex"
    assert task_json(task) == {"id": 1, "prompt": "x", "tier": "flex"}


def test_a_task_schema_is_checked_and_goes_with_the_task() -> None:
    text = json.dumps({"id": 1, "prompt": "x", "schema": VERDICT})
    task = parse_task_line(text, 1, ALIASES)
    assert task is not None and task.schema == VERDICT
    assert task_json(task) == {"id": 1, "prompt": "x", "schema": VERDICT}
    assert parse_task_line(json.dumps(task_json(task)), 1) == task
    # Free keys: refused for OpenAI's strict mode only (a task naming no model is checked
    # against the root's model by the command, which knows it).
    for model in ("claude-haiku-4-5", None):
        line = {"id": 2, "prompt": "x", "schema": FREE_KEYS, **({"model": model} if model else {})}
        free = parse_task_line(json.dumps(line), 2)
        assert free is not None and free.schema == FREE_KEYS
    assert schema_refusal(FREE_KEYS, "gpt-5-mini/low") is not None
    assert schema_refusal(FREE_KEYS, "claude-haiku-4-5") is None
    lines = [{"id": 1, "prompt": "a", "schema": []}, {"id": 2, "prompt": "b", "schema": VERDICT}]
    parsed = read_tasks("".join(json.dumps(line) + "\n" for line in lines).encode())
    assert [task.id for task in parsed.tasks] == [2]
    assert [(error.line, error.message) for error in parsed.errors] == [
        (1, "'schema' must be a JSON schema object, not an array")
    ]


def test_an_unknown_model_quotes_the_reference_text() -> None:
    message = line_error('{"id": 1, "prompt": "x", "model": "llama-3"}')
    assert message.startswith("'model': Unknown model: llama-3\n\nSupported models:")


def test_oversized_prompt_is_refused_with_its_size() -> None:
    prompt = "é" * (MAX_TEXT_BYTES // 2 + 1)
    message = line_error(json.dumps({"id": 1, "prompt": prompt}))
    assert message == f"'prompt' is {MAX_TEXT_BYTES + 2:,} bytes; the limit is {MAX_TEXT_BYTES:,}"


def test_read_tasks_numbers_lines_and_reports_each_bad_one() -> None:
    data = b"\n".join(
        [
            b'\xef\xbb\xbf{"id": 1, "prompt": "first"}\r',
            b"",
            b'{"id": "1", "prompt": "same id as text"}',
            b'{"id": 2, "prompt": "caf\xff"}',
            b'{"id": 3, "prompt": "third"}',
            b"oops",
            b'{"id": 3, "prompt": "again"}',
            b"",
        ]
    )
    parsed = read_tasks(data)
    assert [(t.id, t.line, t.prompt) for t in parsed.tasks] == [(1, 1, "first"), (3, 5, "third")]
    assert [(e.line, e.message) for e in parsed.errors] == [
        (3, 'duplicate id "1": first on line 1'),
        (4, "not valid UTF-8: byte 0xff at column 25"),
        (6, "not valid JSON: Expecting value at column 1"),
        (7, "duplicate id 3: first on line 5"),
    ]


# --- fuzzing ---------------------------------------------------------------------------------

# Text with every code point, unpaired surrogates included (JSON can spell them).
ANY_TEXT = st.text(st.characters(exclude_categories=()), max_size=20)
JSON_SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | ANY_TEXT
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(ANY_TEXT, inner),
    max_leaves=12,
)


def check_error(error: TaskLineError, line: int) -> None:
    assert error.line == line
    assert error.message.strip()
    error.message.encode("utf-8")  # never carries an unpaired surrogate out


@given(st.text(st.characters(exclude_categories=()), max_size=300), st.integers(1, 10**6))
def test_any_text_is_a_task_none_or_a_line_error(text: str, line: int) -> None:
    try:
        task = parse_task_line(text, line, ALIASES)
    except TaskLineError as error:
        check_error(error, line)
        return
    assert task is None or task.line == line


@given(
    JSON_VALUES
    | st.dictionaries(
        st.sampled_from(["id", "prompt", "model", "system", "schema", "x"]), JSON_VALUES
    )
)
def test_any_json_value_is_a_task_or_a_line_error(value: Any) -> None:
    text = json.dumps(value)
    try:
        task = parse_task_line(text, 3, ALIASES)
    except TaskLineError as error:
        check_error(error, 3)
        return
    assert task is not None
    assert isinstance(value, dict) and value["prompt"] == task.prompt
    assert task.key == id_key(value["id"])


@given(st.binary(max_size=400))
def test_any_bytes_split_into_tasks_and_errors_by_line(data: bytes) -> None:
    parsed = read_tasks(data, ALIASES)
    lines = [t.line for t in parsed.tasks] + [e.line for e in parsed.errors]
    assert len(lines) == len(set(lines))
    assert all(1 <= line <= data.count(b"\n") + 1 for line in lines)
    assert len({t.key for t in parsed.tasks}) == len(parsed.tasks)


VALID_TASKS = st.fixed_dictionaries(
    {
        "id": st.text(min_size=1, max_size=10) | st.integers(),
        "prompt": st.text(min_size=1, max_size=40).filter(str.strip),
    },
    optional={
        "model": st.sampled_from(["gpt-5-mini", "claude-haiku-4-5/none", "fast", None]),
        "system": st.text(max_size=20) | st.none(),
    },
)

# One defect each, with the exact message it must produce.
MUTATIONS: list[tuple[str, Callable[[dict[str, Any]], None]]] = [
    ("missing required field 'id'", lambda t: t.pop("id")),
    ("missing required field 'prompt'", lambda t: t.pop("prompt")),
    ("'id' must be a string or a number, not null", lambda t: t.update(id=None)),
    ("'id' must be a string or a number, not an object", lambda t: t.update(id={"a": 1})),
    ("'id' is an empty string", lambda t: t.update(id="")),
    ("'prompt' must be a string, not an array", lambda t: t.update(prompt=["x"])),
    ("'prompt' is empty", lambda t: t.update(prompt="\n ")),
    ("'model' must be a string, not a boolean", lambda t: t.update(model=False)),
    ("'system' must be a string, not a number", lambda t: t.update(system=1.5)),
    ("'schema' must be a JSON schema object, not an array", lambda t: t.update(schema=[1])),
    (
        "unknown field 'priority' (a task has id, prompt, model, system, schema, tier)",
        lambda t: t.update(priority=1),
    ),
]


@given(VALID_TASKS, st.sampled_from(range(len(MUTATIONS))))
def test_one_defect_gives_exactly_its_message(task: dict[str, Any], which: int) -> None:
    assert parse_task_line(json.dumps(task), 1, ALIASES) is not None
    message, mutate = MUTATIONS[which]
    mutate(task)
    assert line_error(json.dumps(task)) == message


# --- the shared context ----------------------------------------------------------------------


def test_plain_text_context_is_one_user_message(tmp_path: Path) -> None:
    path = tmp_path / "context.md"
    path.write_text("# Guide\n\nBe kind.\n")
    assert read_context(path) == [("user", "# Guide\n\nBe kind.\n")]


def test_jsonl_context_is_the_exchange_in_order(tmp_path: Path) -> None:
    path = tmp_path / "context.jsonl"
    path.write_text(
        '{"role": "user", "content": "Here is the brief."}\n\n'
        '{"role": "assistant", "content": "Understood."}\n'
    )
    assert read_context(path) == [("user", "Here is the brief."), ("assistant", "Understood.")]


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("c.md", " \n", "{path} is empty"),
        ("c.jsonl", "\n", "{path} holds no messages"),
        (
            "c.jsonl",
            '{"role": "user"}',
            '{path} line 1: expected {{"role": "user"|"assistant", "content": "..."}}',
        ),
        (
            "c.jsonl",
            '\n{"role": "system", "content": "x"}',
            '{path} line 2: \'role\' must be "user" or "assistant"',
        ),
        (
            "c.jsonl",
            '{"role": "user", "content": 1}',
            "{path} line 1: 'content' must be a string, not a number",
        ),
        (
            "c.jsonl",
            "{oops",
            "{path} line 1: not valid JSON: Expecting property name enclosed "
            "in double quotes at column 2",
        ),
    ],
)
def test_a_bad_context_file_is_refused_precisely(
    tmp_path: Path, name: str, content: str, message: str
) -> None:
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(ContextError) as caught:
        read_context(path)
    assert str(caught.value) == message.format(path=path)


def test_a_missing_context_file_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(ContextError, match=r"cannot read .*nope\.md: No such file"):
        read_context(tmp_path / "nope.md")
