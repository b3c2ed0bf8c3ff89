"""Typed results in the turn loop: what a turn's final answer must be (`OutputType`) and how an
answer is read, checked and told what is wrong with it, for the model to try again.

How the schema is asked for on the wire is providers/output.py's; here it is only checked.
"""

from __future__ import annotations

import base64
import hashlib
import json
import pickle
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from providers.base import DEFAULT_OUTPUT_RETRIES, JSONObject, OutputSchema
from providers.output_schema import one_line, without_optional_nulls

MAX_PROBLEMS_SHOWN = 8
RETRY_KIND = "output_retry"  # the stored message that sends an answer's problems back


class AnswerError(Exception):
    """An answer that is not the JSON asked for; the text says what is wrong, for the model."""


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
CHECKERS_KEPT = 256


def read_answer(text: str, output: OutputType) -> Any:
    """The answer in `text` as checked JSON data; AnswerError says what is wrong."""
    checker = _CHECKERS.get(output.key) if output.key else None
    if checker is None:
        checker = _checker(output)
        if output.key:
            if len(_CHECKERS) >= CHECKERS_KEPT:
                _CHECKERS.pop(next(iter(_CHECKERS)))
            _CHECKERS[output.key] = checker
    return checker(text)


def _checker(output: OutputType) -> Checker:
    """The checker of one output type: its model unpickled, or its schema compiled."""
    schema = output.schema
    model: type[BaseModel] | None = pickle.loads(output.model) if output.model else None
    if model is not None:
        return lambda text: _read_model(text, schema, model)
    from jsonschema import Draft202012Validator

    validator = Draft202012Validator(schema)
    return lambda text: _read_schema(text, schema, validator)


def _parsed(text: str, schema: JSONObject) -> Any:
    body = _unfenced(text.strip())
    if not body:
        raise AnswerError("The answer is empty; answer with the JSON object the schema describes.")
    try:
        value = json.loads(body)
    except RecursionError:
        raise AnswerError("The answer is not valid JSON: it is nested too deeply.") from None
    except ValueError as exc:
        raise AnswerError(
            f"The answer is not valid JSON ({one_line(str(exc), 120)}); answer with the JSON "
            "object alone, no text around it."
        ) from None
    return without_optional_nulls(value, schema)


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
