"""What the simulated APIs refuse in a structured request's schema, as the real ones do:
OpenAI's strict mode (every object closed, every property required, its keyword subset) and
Anthropic's structured outputs (every object closed).

Written apart from Grove's own conversion (providers/output_dialects.py), which it referees.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

# Keywords OpenAI's strict mode rejects outright.
STRICT_UNSUPPORTED = frozenset(
    {
        "allOf",
        "not",
        "if",
        "then",
        "else",
        "oneOf",
        "dependentRequired",
        "dependentSchemas",
        "patternProperties",
        "unevaluatedProperties",
        "unevaluatedItems",
        "propertyNames",
        "minProperties",
        "maxProperties",
        "minLength",
        "maxLength",
        "uniqueItems",
        "contains",
        "prefixItems",
    }
)


def _contexts(schema: Any, context: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every subschema with where it is, as OpenAI's errors write it: ('properties', 'a')."""
    pending = [(context, schema)]
    while pending:
        where, node = pending.pop()
        if not isinstance(node, dict):
            continue
        yield where, node
        for key in ("properties", "$defs", "definitions"):
            children = node.get(key)
            if isinstance(children, dict):
                pending += [((*where, key, name), child) for name, child in children.items()]
        for key in ("items", "additionalProperties"):
            if isinstance(node.get(key), dict):
                pending.append(((*where, key), node[key]))
        for key in ("anyOf", "oneOf", "allOf"):
            if isinstance(node.get(key), list):
                pending += [((*where, key, str(i)), c) for i, c in enumerate(node[key])]


def strict_problem(schema: Any) -> str | None:
    """Why OpenAI's strict mode refuses `schema` (its error text after the schema's name),
    or None."""
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return (
            "In context=(), schema must be a JSON Schema of 'type: \"object\"', got 'type: None'."
        )
    for where, node in _contexts(schema):
        context = f"In context={where!r}, "
        for key in sorted(STRICT_UNSUPPORTED & node.keys()):
            return f"{context}'{key}' is not permitted."
        if node.get("type") == "object" or "properties" in node:
            if node.get("additionalProperties") is not False:
                return (
                    f"{context}'additionalProperties' is required to be supplied and to be false."
                )
            properties = node.get("properties") or {}
            required = node.get("required") or []
            missing = [name for name in properties if name not in required]
            if missing:
                return (
                    f"{context}'required' is required to be supplied and to be an array "
                    f"including every key in properties. Missing '{missing[0]}'."
                )
        if "$ref" in node and len(node) > 1:
            return f"{context}$ref cannot have keywords {sorted(set(node) - {'$ref'})}."
    return None


def closed_objects_problem(schema: Any, field: str) -> str | None:
    """Why Anthropic refuses `schema` for structured outputs, or None."""
    if not isinstance(schema, dict):
        return f"{field}: Input should be a valid dictionary"
    for _, node in _contexts(schema):
        is_object = node.get("type") == "object" or "properties" in node
        if is_object and node.get("additionalProperties") is not False:
            return (
                f"{field}: For 'object' type, 'additionalProperties' must be explicitly set to "
                "false"
            )
    return None
