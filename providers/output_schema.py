"""An output schema checked once, whatever the provider: valid JSON Schema, bounded, its patterns
RE2's, its references local and loop-free. Pure functions; dialects are output_dialects.py's.
"""

from __future__ import annotations

import json
import re
import threading

from grove.providers.base import JSONObject
from grove.providers.errors import OutputSchemaError, PatternError
from grove.providers.linear_regex import compile_re2
from grove.providers.schema_refs import check_references, inline_root_ref, subschemas

MAX_SCHEMA_CHARS = 200_000
MAX_SCHEMA_DEPTH = 64  # JSON nesting of the schema document itself
# Schemas found good, as JSON text: checking one (jsonschema's meta-schema) takes milliseconds,
# and a batch's thousand tasks, or its chunks of forks, bring the same one again and again.
_CHECKED: dict[str, str] = {}
_CHECKED_LOCK = threading.Lock()  # the service checks schemas in several threads at once
CHECKED_KEPT = 256
_NAME_FORBIDDEN = re.compile(r"[^A-Za-z0-9_-]+")


def output_name(text: str | None) -> str:
    """A name every API takes for an output schema (letters, digits, _ and -, at most 64)."""
    name = _NAME_FORBIDDEN.sub("_", text or "").strip("_")[:64]
    return name or "output"


def checked_schema(schema: object) -> JSONObject:
    """`schema` checked as an output schema: a valid JSON Schema (draft 2020-12) whose root
    is an object, of bounded size. A root `$ref` (a recursive pydantic model) is inlined,
    references to it becoming `#`. OutputSchemaError otherwise."""
    if not isinstance(schema, dict):
        raise OutputSchemaError(f"an output schema is a JSON object, not {type(schema).__name__}")
    try:
        text = json.dumps(schema)
    except (TypeError, ValueError) as exc:
        raise OutputSchemaError(f"the output schema is not JSON: {exc}") from exc
    except RecursionError as exc:
        raise OutputSchemaError("the output schema is nested too deeply") from exc
    if len(text) > MAX_SCHEMA_CHARS:
        raise OutputSchemaError(
            f"the output schema is {len(text):,} characters, over the {MAX_SCHEMA_CHARS:,} limit"
        )
    with _CHECKED_LOCK:
        known = _CHECKED.get(text)
    if known is not None:  # a batch's tasks share their schema: checked once
        checked: JSONObject = json.loads(known)
        return checked
    if nesting_depth(schema, MAX_SCHEMA_DEPTH) > MAX_SCHEMA_DEPTH:
        raise OutputSchemaError(
            f"the output schema is nested deeper than {MAX_SCHEMA_DEPTH} levels"
        )
    _check_meta(schema)
    root = inline_root_ref(json.loads(text))
    _check_patterns(root)
    check_references(root)
    if root.get("type") != "object" and "properties" not in root:
        raise OutputSchemaError(
            'the root of an output schema must be an object ({"type": "object", '
            '"properties": {...}}); put a list or a value in a property of one'
        )
    with _CHECKED_LOCK:
        if len(_CHECKED) >= CHECKED_KEPT:
            _CHECKED.pop(next(iter(_CHECKED)))
        _CHECKED[text] = json.dumps(root)
    return root


def _check_meta(schema: JSONObject) -> None:
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(step) for step in exc.path)
        raise OutputSchemaError(
            f"the output schema is not a valid JSON Schema: {one_line(exc.message)}"
            + (f" (at /{where})" if where else "")
        ) from None


def _check_patterns(root: JSONObject) -> None:
    """Every `pattern` and `patternProperties` key compiled by RE2, which answers are checked
    with (linear time, no backtracking); OutputSchemaError names one it cannot take."""
    pattern_properties = unevaluated = False
    for path, schema in subschemas(root):
        patterns = (
            [("pattern", schema["pattern"])] if isinstance(schema.get("pattern"), str) else []
        )
        keyed = schema.get("patternProperties")
        if isinstance(keyed, dict):
            pattern_properties = True
            patterns += [("patternProperties", key) for key in keyed]
        unevaluated = unevaluated or "unevaluatedProperties" in schema
        for keyword, pattern in patterns:
            try:
                compile_re2(pattern)
            except PatternError as exc:
                raise OutputSchemaError(
                    f"the output schema's {keyword} {pattern!r} at {path or '/'} is not one RE2 "
                    f"takes ({one_line(str(exc), 120)}); Grove checks answers with RE2, which "
                    "has no backreferences or lookaround"
                ) from None
    if pattern_properties and unevaluated:
        raise OutputSchemaError(
            "the output schema uses unevaluatedProperties beside patternProperties, which "
            "Grove cannot check in linear time; use additionalProperties instead"
        )


def nesting_depth(value: object, limit: int) -> int:
    """The nesting depth of a JSON value, walked without recursion; past `limit` the walk
    stops and says a depth over it."""
    deepest, pending = 0, [(value, 1)]
    while pending:
        item, depth = pending.pop()
        deepest = max(deepest, depth)
        if depth > limit:
            return depth
        if isinstance(item, dict):
            pending.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, list):
            pending.extend((child, depth + 1) for child in item)
    return deepest


def one_line(text: str, limit: int = 300) -> str:
    """`text` on one line, at most `limit` characters."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"
