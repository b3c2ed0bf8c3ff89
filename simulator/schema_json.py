"""JSON made from a JSON Schema, for the simulator's structured answers: a value the schema
accepts (nested objects, arrays, enums, `$ref`/`$defs`, formats, bounds), or a malformed one.

Deterministic: the same schema and seed give the same value. Patterns are not followed. Like
a model, it heeds bounds written into a description (`(minimum=1)`, `{minLength: 2}`), where
clients put the constraints a provider's schema subset lacks.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
from typing import Any, TypeGuard

DEEP = 4  # past this depth: only what is required, the shortest arrays, null where allowed
MAX_DEPTH = 24  # a schema whose required part recurses deeper gets null or {} there
_FORMATS: dict[str, str] = {
    "date-time": "2026-01-15T09:30:00Z",
    "date": "2026-01-15",
    "time": "09:30:00Z",
    "duration": "P1DT2H",
    "email": "river@example.com",
    "idn-email": "river@example.com",
    "hostname": "example.com",
    "idn-hostname": "example.com",
    "uri": "https://example.com/path",
    "uri-reference": "https://example.com/path",
    "iri": "https://example.com/path",
    "ipv4": "192.0.2.7",
    "ipv6": "2001:db8::7",
    "uuid": "5f0c8d2e-8b1a-4c7e-9f3a-2d6b1e4a7c90",
    "json-pointer": "/path/0",
    "regex": "[a-z]+",
}
WORDS = (
    "river", "stone", "green", "signal", "open", "steady", "answer", "plan", "tree",
    "review", "light", "path", "calm", "bright", "note", "field", "value", "line",
)  # fmt: skip
_NOTED = re.compile(
    r"\b(minimum|maximum|exclusiveMinimum|exclusiveMaximum|multipleOf|minLength|maxLength"
    r"|minItems|maxItems)\s*[=:]\s*(-?[0-9]+(?:\.[0-9]+)?)"
)
_TYPES = ("object", "array", "string", "integer", "number", "boolean", "null")


def rng_for(seed: str) -> random.Random:
    digest = hashlib.sha256(seed.encode("utf-8", "surrogatepass")).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def json_for(schema: Any, seed: str) -> Any:
    """A value `schema` accepts (patterns aside), the same for the same `seed`."""
    return _Maker(schema, rng_for(seed)).value(schema, 0)


def malformed_for(schema: Any, seed: str, *, as_object: bool) -> str:
    """JSON text `schema` does not accept: cut off mid-way, missing a required property, or
    a property of the wrong type. `as_object`: always a JSON object (tool arguments)."""
    rng = rng_for("malformed:" + seed)
    good = _Maker(schema, rng).value(schema, 0)
    text = json.dumps(good, ensure_ascii=False)
    if not as_object and rng.random() < 1 / 3:
        return text[: max(len(text) // 2, 1)]
    broken = _broken(schema, good)
    if broken is not None:
        return json.dumps(broken, ensure_ascii=False)
    if as_object:
        return json.dumps({"__unexpected__": True})
    return text[: max(len(text) // 2, 1)]


_WRONG_VALUES: tuple[Any, ...] = ({"unexpected": [1, "two"]}, "unexpected", 12345, True, None)


def _broken(schema: Any, good: Any) -> dict[str, Any] | None:
    """`good` with a required property left out or a property's value of the wrong type:
    the first such change the schema rejects, or None."""
    from jsonschema import Draft202012Validator

    if not isinstance(good, dict) or not isinstance(schema, dict):
        return None
    validator = Draft202012Validator(schema)
    candidates = [
        {key: value for key, value in good.items() if key != name}
        for name in schema.get("required") or []
        if name in good
    ]
    candidates += [{**good, name: wrong} for name in good for wrong in _WRONG_VALUES]
    return next((c for c in candidates if not validator.is_valid(c)), None)


class _Maker:
    def __init__(self, root: Any, rng: random.Random) -> None:
        self.root = root
        self.rng = rng

    def resolve(self, ref: str) -> Any:
        if ref == "#":
            return self.root
        if not ref.startswith("#/"):
            return True
        node = self.root
        for step in ref[2:].split("/"):
            step = step.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and step in node:
                node = node[step]
            elif isinstance(node, list) and step.isdigit() and int(step) < len(node):
                node = node[int(step)]
            else:
                return True
        return node

    def flat(self, schema: Any, depth: int) -> Any:
        """`schema` with its `$ref` and `allOf` merged in (siblings override)."""
        for _ in range(32):
            if not isinstance(schema, dict):
                return schema
            if isinstance(schema.get("$ref"), str):
                target = self.resolve(schema["$ref"])
                rest = {k: v for k, v in schema.items() if k != "$ref"}
                schema = {**target, **rest} if isinstance(target, dict) else (rest or target)
                continue
            if isinstance(schema.get("allOf"), list):
                merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
                for part in schema["allOf"]:
                    merged = _merge(merged, self.flat(part, depth))
                schema = merged
                continue
            return _heeding_description(schema)
        return schema

    def value(self, schema: Any, depth: int) -> Any:
        schema = self.flat(schema, depth)
        if schema is True or schema == {}:
            return self.words(1, 3)
        if not isinstance(schema, dict):
            return None
        if "const" in schema:
            return schema["const"]
        if isinstance(schema.get("enum"), list) and schema["enum"]:
            return self.pick(schema["enum"], depth)
        branches = schema.get("anyOf") or schema.get("oneOf")
        if isinstance(branches, list) and branches:
            rest = {k: v for k, v in schema.items() if k not in ("anyOf", "oneOf")}
            branch = self.pick(branches, depth, null=lambda b: _is_null_schema(b))
            return self.value(_merge(rest, self.flat(branch, depth)), depth)
        kind = self.kind(schema, depth)
        if kind == "object":
            return self.object(schema, depth)
        if kind == "array":
            return self.array(schema, depth)
        if kind == "integer":
            return self.integer(schema)
        if kind == "number":
            return self.number(schema)
        if kind == "boolean":
            return self.rng.random() < 0.5
        if kind == "null":
            return None
        return self.string(schema)

    def pick(self, options: list[Any], depth: int, null: Any = None) -> Any:
        """One of `options`: past DEEP a null one when there is one, else not a null one."""
        is_null = null or (lambda option: option is None)
        nulls = [option for option in options if is_null(option)]
        others = [option for option in options if not is_null(option)]
        if nulls and (depth >= DEEP or not others):
            return nulls[0]
        return self.rng.choice(others or options)

    def kind(self, schema: dict[str, Any], depth: int) -> str:
        kind = schema.get("type")
        if isinstance(kind, list):
            known = [k for k in kind if k in _TYPES] or ["null"]
            return str(self.pick(known, depth, null=lambda k: k == "null"))
        if isinstance(kind, str):
            return kind
        if "properties" in schema or "required" in schema:
            return "object"
        if "items" in schema or "prefixItems" in schema:
            return "array"
        return "string"

    def object(self, schema: dict[str, Any], depth: int) -> dict[str, Any]:
        properties: dict[str, Any] = schema.get("properties") or {}
        required = [name for name in schema.get("required") or [] if isinstance(name, str)]
        wanted = int(schema.get("minProperties", 0) or 0)
        result: dict[str, Any] = {}
        for name in required:
            result[name] = self.value(properties.get(name, True), depth + 1)
        for name, item in properties.items():
            if name in result:
                continue
            if depth < DEEP or len(result) < wanted:
                if depth >= MAX_DEPTH:
                    continue
                result[name] = self.value(item, depth + 1)
        extra = schema.get("additionalProperties", True)
        index = 0
        while len(result) < wanted and extra is not False and index < 1000:
            result.setdefault(f"extra_{index}", self.value(extra, depth + 1))
            index += 1
        return result

    def array(self, schema: dict[str, Any], depth: int) -> list[Any]:
        low = int(schema.get("minItems", 0) or 0)
        high = schema.get("maxItems")
        count = low if depth >= DEEP else max(low, self.rng.randint(1, 2))
        if isinstance(high, int):
            count = min(count, high)
        given = schema.get("prefixItems")
        prefix: list[Any] = given if isinstance(given, list) else []
        items = schema.get("items", True)
        result: list[Any] = []
        for index in range(max(count, len(prefix) if depth < DEEP else min(len(prefix), low))):
            if index < len(prefix):
                result.append(self.value(prefix[index], depth + 1))
            elif items is not False:
                result.append(self.value(items, depth + 1))
        if schema.get("uniqueItems"):
            result = self.unique(result, items, depth)
        return result

    def unique(self, values: list[Any], items: Any, depth: int) -> list[Any]:
        seen: list[Any] = []
        for value in values:
            for _ in range(20):
                if value not in seen:
                    break
                value = self.value(items, depth + 1)
            if value not in seen:
                seen.append(value)
        return seen

    def integer(self, schema: dict[str, Any]) -> int:
        bounds = _bounds(schema, integer=True)
        low, high = int(bounds[0]), int(bounds[1])
        step = schema.get("multipleOf")
        if isinstance(step, int) and not isinstance(step, bool) and step > 0:
            first = -(-low // step) * step
            if first <= high:
                return first + step * self.rng.randint(0, min((high - first) // step, 50))
        return self.rng.randint(low, high)

    def number(self, schema: dict[str, Any]) -> float:
        low, high = _bounds(schema, integer=False)
        step = schema.get("multipleOf")
        if _number(step) and step > 0:
            value = math.ceil(low / step) * step
            return float(value) if value <= high else low
        value = round(self.rng.uniform(low, high), 2)
        return value if low <= value <= high else low

    def string(self, schema: dict[str, Any]) -> str:
        shaped = _FORMATS.get(str(schema.get("format")))
        low = int(schema.get("minLength", 0) or 0)
        high = schema.get("maxLength")
        text = shaped if shaped is not None else self.words(1, 4)
        while len(text) < low:
            text += " " + self.words(1, 3)
        if isinstance(high, int) and len(text) > high:
            text = text[:high]
        return text

    def words(self, low: int, high: int) -> str:
        return " ".join(self.rng.choice(WORDS) for _ in range(self.rng.randint(low, high)))


def _bounds(schema: dict[str, Any], *, integer: bool) -> tuple[float, float]:
    """The range a number may take: the schema's bounds (exclusive ones nudged inside),
    else a hundred wide."""
    nudge = 1 if integer else 0.01
    lows = [float(v) for v in [schema.get("minimum")] if _number(v)]
    lows += [float(v) + nudge for v in [schema.get("exclusiveMinimum")] if _number(v)]
    highs = [float(v) for v in [schema.get("maximum")] if _number(v)]
    highs += [float(v) - nudge for v in [schema.get("exclusiveMaximum")] if _number(v)]
    low = max(lows) if lows else None
    high = min(highs) if highs else None
    if low is None:
        low = 0.0 if high is None else min(0.0, high - 100)
    if high is None:
        high = max(100.0, low + 100)
    if integer:
        low, high = float(math.ceil(low)), float(math.floor(high))
    return low, max(low, high)


def _heeding_description(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` with the bounds its description states, where it states none itself."""
    described = schema.get("description")
    if not isinstance(described, str):
        return schema
    noted = {key: _numeral(value) for key, value in _NOTED.findall(described)}
    return {**noted, **schema} if noted else schema


def _numeral(text: str) -> float | int:
    return float(text) if "." in text else int(text)


def _number(value: object) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_null_schema(schema: Any) -> bool:
    return isinstance(schema, dict) and schema.get("type") == "null"


def _merge(first: dict[str, Any], second: Any) -> dict[str, Any]:
    """Two schemas' keywords in one (as allOf means), properties and required joined."""
    if not isinstance(second, dict):
        return first
    merged = {**first, **second}
    if isinstance(first.get("properties"), dict) and isinstance(second.get("properties"), dict):
        merged["properties"] = {**first["properties"], **second["properties"]}
    if isinstance(first.get("required"), list) and isinstance(second.get("required"), list):
        merged["required"] = list(dict.fromkeys([*first["required"], *second["required"]]))
    return merged
