"""A bad `--output-schema` file is one line naming the problem and exit 2 for `grove run` and
`grove batch`, before Ray starts and before a batch writes anything: a file that is not JSON,
JSON that is not a schema, a keyword the chosen provider's strict mode refuses, a missing file.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.security.commands import Place

FREE_KEYS = {
    "type": "object",
    "properties": {"tags": {"type": "object", "additionalProperties": True}},
}
ROOT_TEXT = 'must be an object ({"type": "object", "properties": {...}}); put a list or a value'
# (name, file content, the one line said, {path} the file)
BAD = [
    ("not-json", "{severity: high}",
     "the output schema {path} is not JSON: Expecting property name enclosed in double quotes: "
     "line 1 column 2 (char 1)"),
    ("array", "[1, 2]", "{path}: an output schema is a JSON object, not list"),
    ("bad-type", json.dumps({"type": "objekt"}),
     "{path}: the output schema is not a valid JSON Schema: 'objekt' is not valid under any of "
     "the given schemas (at /type)"),
    ("root-array", json.dumps({"type": "array"}),
     "{path}: the root of an output schema " + ROOT_TEXT + " in a property of one"),
    ("strict", json.dumps(FREE_KEYS),
     "{path}: the output schema uses additionalProperties (an object with free keys) at "
     "/properties/tags, which OpenAI's strict mode cannot take; list its keys as properties, "
     "or use another provider"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "content", "said"), BAD, ids=[case[0] for case in BAD])
def test_a_bad_schema_file_is_one_line_and_exit_2_before_ray(
    place: Place, name: str, content: str, said: str
) -> None:
    schema = place.base / f"{name}.json"
    schema.write_text(content)
    tasks = place.base / "tasks.jsonl"
    tasks.write_text('{"id": 1, "prompt": "Review."}\n')
    output = place.base / "out.jsonl"
    for args in (
        ("run", "--simulate", "-m", "gpt-6.1-terra", "--output-schema", str(schema), "Review."),
        ("batch", str(tasks), "--simulate", "-m", "gpt-6.1-terra", "--output-schema", str(schema),
         "--output", str(output)),
    ):  # fmt: skip
        done = place.grove(*args)
        assert done.returncode == 2, (args, done.stderr)
        assert done.stderr.strip() == said.replace("{path}", str(schema)), args
        assert done.stdout == "" and not output.exists()
    assert not place.ray_started()


def test_strict_mode_is_checked_for_the_provider_chosen(place: Place) -> None:
    """Free keys are refused for OpenAI's strict mode only: a batch whose tasks run on OpenAI
    stops at once, whoever the root is; one on Claude alone would run."""
    schema = place.base / "free.json"
    schema.write_text(json.dumps(FREE_KEYS))
    tasks = place.base / "tasks.jsonl"
    tasks.write_text(
        '{"id": 1, "prompt": "a"}\n{"id": 2, "prompt": "b", "model": "gpt-6.1-terra"}\n'
    )
    done = place.grove(
        "batch", str(tasks), "--simulate", "-m", "claude-haiku-4-5", "--output-schema", str(schema)
    )
    assert done.returncode == 2
    assert "OpenAI's strict mode cannot take" in done.stderr
    assert not place.ray_started()


def test_a_missing_schema_file_and_retries_out_of_range(place: Place) -> None:
    missing = place.base / "missing.json"
    done = place.grove(
        "run", "--simulate", "-m", "gpt-6.1-terra", "--output-schema", str(missing), "x"
    )
    assert done.returncode == 2
    assert (
        done.stderr.strip() == f"cannot read the output schema {missing}: No such file or directory"
    )
    schema = place.base / "ok.json"
    schema.write_text(json.dumps({"type": "object", "properties": {"ok": {"type": "boolean"}}}))
    done = place.grove(
        "run", "--simulate", "-m", "gpt-6.1-terra", "--output-schema", str(schema),
        "--output-retries", "21", "x",
    )  # fmt: skip
    assert done.returncode == 2
    assert "Invalid value for '--output-retries'" in done.stderr
    assert not place.ray_started()


def test_a_schema_file_that_is_not_utf8_or_too_large(place: Place) -> None:
    latin = place.base / "latin.json"
    latin.write_bytes(b'{"title": "caf\xe9", "type": "object"}')
    huge = place.base / "huge.json"
    huge.write_text('{"type": "object", "description": "' + "x" * 1_000_000 + '"}')
    for path, problem in (
        (latin, f"the output schema {latin} is not UTF-8 text (byte 15)"),
        (huge, f"the output schema {huge} is larger than 800,000 bytes"),
    ):
        done = place.grove(
            "run", "--simulate", "-m", "gpt-6.1-terra", "--output-schema", str(path), "x"
        )
        assert (done.returncode, done.stderr.strip()) == (2, problem)
    assert not place.ray_started()


def test_the_error_texts_name_the_file(tmp_path: Path) -> None:
    """The texts as a user reads them (checked without a process)."""
    from grove.providers.errors import OutputSchemaError
    from grove.supervisor.output_files import schema_file

    path = tmp_path / "s.json"
    path.write_text("{")
    with pytest.raises(OutputSchemaError) as refused:
        schema_file(path)
    assert str(refused.value) == (
        f"the output schema {path} is not JSON: Expecting property name enclosed in double "
        "quotes: line 1 column 2 (char 1)"
    )
    path.write_text(json.dumps(FREE_KEYS))
    assert schema_file(path, ["anthropic", "google"]) == FREE_KEYS
    with pytest.raises(OutputSchemaError, match=r"additionalProperties .* at /properties/tags"):
        schema_file(path, ["anthropic", "openai"])
