"""Typed results in the turn loop: what a turn's final answer must be (`OutputType`) and how an
answer is read, checked and told what is wrong with it, for the model to try again.

How the schema is asked for on the wire is providers/output.py's; here it is only checked:
off the event loop, within CHECK_TIMEOUT_S, its patterns by RE2 (linear time).
"""

from __future__ import annotations

import asyncio
import base64
import functools
import hashlib
import json
import pickle
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from grove.actors.errors import AnswerError
from grove.providers.base import DEFAULT_OUTPUT_RETRIES, JSONObject, OutputSchema
from grove.providers.linear_regex import CompiledPattern, compile_re2
from grove.providers.output_dialects import without_optional_nulls
from grove.providers.output_schema import MAX_SCHEMA_DEPTH, nesting_depth, one_line

MAX_PROBLEMS_SHOWN = 8
# An answer nested deeper is refused before it is checked (a recursive schema checks one
# level in a handful of Python frames: far deeper would exhaust the stack).
MAX_ANSWER_DEPTH = MAX_SCHEMA_DEPTH
# How long checking one answer may take; past it the answer is refused as too costly.
CHECK_TIMEOUT_S = 10.0
# Threads that check answers: a check that overruns its time keeps one until it ends (a
# thread cannot be stopped), so they are few, and never the event loop's own.
_CHECKING = ThreadPoolExecutor(max_workers=2, thread_name_prefix="grove-answer-check")
RETRY_KIND = "output_retry"  # the stored message that sends an answer's problems back


@dataclass(frozen=True, kw_only=True, slots=True)
class OutputType:
    """What a turn's final answer must be: JSON of `schema` (checked, its root an object),
    read by the pydantic model pickled in `model` when there is one (its validators run
    too), sent back with its problems at most `retries` times. `key` names the pair (a
    digest), so each host builds its checker once."""

    name: str
    schema: JSONObject
    retries: int = DEFAULT_OUTPUT_RETRIES
    model: bytes | None = field(default=None, repr=False)
    key: str = ""

    @classmethod
    def of(
        cls, name: str, schema: JSONObject, retries: int, model: bytes | None = None
    ) -> OutputType:
        digest = hashlib.sha256(json.dumps(schema, sort_keys=True).encode())
        digest.update(model or b"")
        return cls(name=name, schema=schema, retries=retries, model=model, key=digest.hexdigest())

    @property
    def request(self) -> OutputSchema:
        return OutputSchema(name=self.name, schema=self.schema)

    def to_data(self) -> dict[str, Any]:
        """As an agent record keeps it: JSON, the model's pickled code in base64."""
        data: dict[str, Any] = {"name": self.name, "schema": self.schema, "retries": self.retries}
        if self.model is not None:
            data["model"] = base64.b64encode(self.model).decode("ascii")
        return data

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> OutputType:
        model = base64.b64decode(data["model"]) if data.get("model") else None
        return cls.of(str(data["name"]), dict(data["schema"]), int(data["retries"]), model)


Checker = Callable[[str], Any]
_CHECKERS: dict[str, Checker] = {}
_CHECKERS_LOCK = threading.Lock()  # answers are checked in several threads
CHECKERS_KEPT = 256


async def check_answer(text: str, output: OutputType) -> Any:
    """`read_answer` in a checking thread, within CHECK_TIMEOUT_S: the event loop, and every
    other agent of the host, go on meanwhile."""
    checking = asyncio.get_running_loop().run_in_executor(
        _CHECKING, functools.partial(read_answer, text, output)
    )
    try:
        return await asyncio.wait_for(checking, CHECK_TIMEOUT_S)
    except TimeoutError:
        raise AnswerError(
            f"Checking the answer against the schema took more than {CHECK_TIMEOUT_S:g} s; "
            "answer with a smaller JSON object."
        ) from None


def read_answer(text: str, output: OutputType) -> Any:
    """The answer in `text` as checked JSON data; AnswerError says what is wrong."""
    with _CHECKERS_LOCK:
        checker = _CHECKERS.get(output.key) if output.key else None
    if checker is None:
        checker = _checker(output)
        if output.key:
            with _CHECKERS_LOCK:
                if len(_CHECKERS) >= CHECKERS_KEPT:
                    _CHECKERS.pop(next(iter(_CHECKERS)))
                _CHECKERS[output.key] = checker
    try:
        return checker(text)
    except RecursionError:  # a schema that recurses more per level than MAX_ANSWER_DEPTH allows
        raise AnswerError(
            "The answer is nested too deeply to check against the schema; answer with a "
            "flatter JSON object."
        ) from None


def _checker(output: OutputType) -> Checker:
    """The checker of one output type: its model unpickled, or its schema compiled."""
    schema = output.schema
    model: type[BaseModel] | None = pickle.loads(output.model) if output.model else None
    if model is not None:
        return lambda text: _read_model(text, schema, model)
    validator = _linear_validator()(schema)
    return lambda text: _read_schema(text, schema, validator)


@functools.cache
def _linear_validator() -> Any:
    """Draft 2020-12 with `pattern`, `patternProperties` and `additionalProperties` (which
    reads patternProperties) on RE2: jsonschema's own use `re`, which backtracks."""
    from jsonschema import Draft202012Validator, validators
    from jsonschema.exceptions import ValidationError as SchemaMismatch

    def pattern(validator: Any, expression: str, instance: Any, schema: Any) -> Iterator[Any]:
        if validator.is_type(instance, "string") and _re2(expression).search(instance) is None:
            yield SchemaMismatch(f"{instance!r} does not match {expression!r}")

    def pattern_properties(
        validator: Any, patterns: dict[str, Any], instance: Any, schema: Any
    ) -> Iterator[Any]:
        if not validator.is_type(instance, "object"):
            return
        for expression, subschema in patterns.items():
            compiled = _re2(expression)
            for key, value in instance.items():
                if compiled.search(key) is not None:
                    yield from validator.descend(value, subschema, path=key, schema_path=expression)

    def additional_properties(
        validator: Any, additional: Any, instance: Any, schema: Any
    ) -> Iterator[Any]:
        if not validator.is_type(instance, "object"):
            return
        known = schema.get("properties", {})
        patterns = [_re2(expression) for expression in schema.get("patternProperties", {})]
        extras = sorted(
            key
            for key in instance
            if key not in known and not any(p.search(key) is not None for p in patterns)
        )
        if validator.is_type(additional, "object"):
            for extra in extras:
                yield from validator.descend(instance[extra], additional, path=extra)
        elif not additional and extras:
            shown = ", ".join(repr(extra) for extra in extras)
            yield SchemaMismatch(f"Additional properties are not allowed ({shown} unexpected)")

    return validators.extend(
        Draft202012Validator,
        {
            "pattern": pattern,
            "patternProperties": pattern_properties,
            "additionalProperties": additional_properties,
        },
    )


@functools.lru_cache(maxsize=1024)
def _re2(expression: str) -> CompiledPattern:
    """A schema's pattern compiled by RE2 (checked_schema made sure it compiles)."""
    return compile_re2(expression)


def _parsed(text: str, schema: JSONObject) -> Any:
    body = _unfenced(text.strip())
    if not body:
        raise AnswerError("The answer is empty; answer with the JSON object the schema describes.")
    try:
        value = json.loads(body)
    except RecursionError:
        raise AnswerError(_too_deep()) from None
    except ValueError as exc:
        raise AnswerError(
            f"The answer is not valid JSON ({one_line(str(exc), 120)}); answer with the JSON "
            "object alone, no text around it."
        ) from None
    if nesting_depth(value, MAX_ANSWER_DEPTH) > MAX_ANSWER_DEPTH:
        raise AnswerError(_too_deep())
    return without_optional_nulls(value, schema)


def _too_deep() -> str:
    return (
        f"The answer is nested more than {MAX_ANSWER_DEPTH} levels deep; answer with a "
        "flatter JSON object."
    )


def _unfenced(text: str) -> str:
    """Text inside one Markdown code fence (```json ... ```), as models sometimes send it."""
    if text.startswith("```") and text.endswith("```") and "\n" in text:
        return text[text.index("\n") + 1 : -3].strip()
    return text


def _read_model(text: str, schema: JSONObject, model: type[BaseModel]) -> Any:
    value = _parsed(text, schema)
    try:
        return model.model_validate(value).model_dump(mode="json", by_alias=True)
    except ValidationError as exc:
        problems = [
            f"{_where(item['loc'])}: {item['msg']}"
            + ("" if item["type"] == "missing" else f" (got {_short(item.get('input'))})")
            for item in exc.errors(include_url=False)
        ]
        raise AnswerError(_mismatch(problems)) from None


def _read_schema(text: str, schema: JSONObject, validator: Any) -> Any:
    value = _parsed(text, schema)
    errors = sorted(validator.iter_errors(value), key=lambda error: list(error.absolute_path))
    if errors:
        problems = [
            f"{_where(error.absolute_path)}: {one_line(error.message, 160)}" for error in errors
        ]
        raise AnswerError(_mismatch(problems))
    return value


def _where(path: Any) -> str:
    return "/" + "/".join(str(step) for step in path)


def _mismatch(problems: list[str]) -> str:
    shown = problems[:MAX_PROBLEMS_SHOWN]
    more = len(problems) - len(shown)
    tail = f"; and {more} more" if more else ""
    return "The answer does not match the schema: " + "; ".join(shown) + tail + "."


def _short(value: Any, limit: int = 80) -> str:
    shown = repr(value)
    return shown if len(shown) <= limit else shown[: limit - 3] + "..."


def retry_text(error: str, left: int) -> str:
    """What goes back to the model with a malformed answer."""
    tries = "1 more try" if left == 1 else f"{left} more tries"
    return f"{error}\nAnswer again with only the corrected JSON ({tries})."
