"""Output schemas in each provider's dialect: OpenAI's strict mode, Anthropic's and Gemini's
subsets, and answers' optional nulls read back. Pure functions; checks are output_schema.py's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, NoReturn

from grove.providers.base import JSONObject, ProviderName
from grove.providers.errors import OutputSchemaError
from grove.providers.schema_refs import ANNOTATIONS, LOCAL_DEFINITION, reference_cycle

# OpenAI's limits on one strict schema.
STRICT_MAX_NESTING = 10
STRICT_MAX_PROPERTIES = 5_000
STRICT_MAX_ENUM_VALUES = 1_000


@dataclass(frozen=True, kw_only=True, slots=True)
class Dialect:
    """What one provider's structured output takes. `kept` pass as they are; `noted` move
    into the description; `refused` end the conversion with their name; anything else is
    dropped. `closed` gives every object `additionalProperties: false` (and refuses free
    keys); `all_required` lists every property as required, the optional ones nullable."""

    vendor: str
    kept: frozenset[str]
    noted: frozenset[str]
    refused: frozenset[str]
    string_formats: frozenset[str] | None
    closed: bool
    all_required: bool
    recursion: bool
    min_items: frozenset[int] | None = None  # the only minItems values taken (else noted)
    const_as_enum: bool = False


_STRUCTURE = frozenset(
    {"type", "description", "title", "enum", "anyOf", "$ref", "$defs", "definitions"}
)
_OBJECTS = frozenset({"properties", "required", "additionalProperties"})
_VALIDATION_ONLY = frozenset(
    {
        "minLength",
        "maxLength",
        "pattern",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minItems",
        "maxItems",
        "uniqueItems",
        "minProperties",
        "maxProperties",
        "contains",
        "minContains",
        "maxContains",
        "dependentRequired",
        "propertyNames",
        "format",
    }
)
_SHAPES = frozenset(
    {
        "not",
        "if",
        "then",
        "else",
        "dependentSchemas",
        "patternProperties",
        "unevaluatedProperties",
        "unevaluatedItems",
        "additionalItems",
    }
)

OPENAI_STRICT = Dialect(
    vendor="OpenAI's strict mode",
    kept=_STRUCTURE
    | _OBJECTS
    | {"const", "items", "pattern", "format", "multipleOf", "minimum", "maximum"}
    | {"exclusiveMinimum", "exclusiveMaximum", "minItems", "maxItems"},
    noted=_VALIDATION_ONLY
    - {"pattern", "format", "multipleOf", "minimum", "maximum", "exclusiveMinimum"}
    - {"exclusiveMaximum", "minItems", "maxItems"},
    refused=_SHAPES | {"prefixItems"},
    string_formats=frozenset(
        {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
    ),
    closed=True,
    all_required=True,
    recursion=True,
)
# As the anthropic SDK's own transform_schema prepares a schema for `output_config.format`.
ANTHROPIC = Dialect(
    vendor="Anthropic's structured outputs",
    kept=_STRUCTURE | _OBJECTS | {"const", "items", "format", "minItems", "allOf"},
    noted=_VALIDATION_ONLY - {"format", "minItems"},
    refused=_SHAPES | {"prefixItems"},
    string_formats=frozenset(
        {"date-time", "time", "date", "duration", "email", "hostname", "uri", "ipv4", "ipv6"}
        | {"uuid"}
    ),
    closed=True,
    all_required=False,
    recursion=False,
    min_items=frozenset({0, 1}),
)
# Gemini's `responseJsonSchema`: the keywords its documentation lists.
GEMINI = Dialect(
    vendor="Gemini's responseJsonSchema",
    kept=_STRUCTURE
    | _OBJECTS
    | {"items", "prefixItems", "minItems", "maxItems", "minimum", "maximum", "format"}
    | {"propertyOrdering"},
    noted=_VALIDATION_ONLY - {"minItems", "maxItems", "minimum", "maximum", "format"},
    refused=_SHAPES,
    string_formats=None,
    closed=False,
    all_required=False,
    recursion=True,
    const_as_enum=True,
)


def for_provider(schema: JSONObject, provider: ProviderName) -> JSONObject:
    """The schema as `provider`'s native structured output takes it (see the dialects);
    OutputSchemaError naming what it cannot take."""
    dialect = {"openai": OPENAI_STRICT, "anthropic": ANTHROPIC, "google": GEMINI}[provider]
    return convert(schema, dialect)


def convert(schema: JSONObject, dialect: Dialect) -> JSONObject:
    """`schema` (checked) in `dialect`; OutputSchemaError names the first keyword refused."""
    return _Converter(schema, dialect).run()


class _Converter:
    def __init__(self, root: JSONObject, dialect: Dialect) -> None:
        self.root = root
        self.dialect = dialect
        self.properties = 0
        self.enum_values = 0

    def run(self) -> JSONObject:
        if not self.dialect.recursion:
            cycle = reference_cycle(self.root)
            if cycle is not None:
                self.refuse("$ref", cycle, "a recursive schema")
        result = self.node(self.root, "", 1)
        if self.dialect.closed and self.properties > STRICT_MAX_PROPERTIES:
            raise OutputSchemaError(
                f"the output schema has {self.properties:,} properties; {self.dialect.vendor} "
                f"takes at most {STRICT_MAX_PROPERTIES:,}"
            )
        if self.dialect.closed and self.enum_values > STRICT_MAX_ENUM_VALUES:
            raise OutputSchemaError(
                f"the output schema has {self.enum_values:,} enum values; "
                f"{self.dialect.vendor} takes at most {STRICT_MAX_ENUM_VALUES:,}"
            )
        return result

    def refuse(self, keyword: str, path: str, what: str = "", advice: str = "") -> NoReturn:
        shown = f"{keyword} ({what})" if what else keyword
        advice = advice or "leave it out (Grove checks answers against the whole schema)"
        raise OutputSchemaError(
            f"the output schema uses {shown} at {path or '/'}, which {self.dialect.vendor} "
            f"cannot take; {advice}, or use another provider"
        )

    def node(self, schema: object, path: str, depth: int) -> JSONObject:
        dialect = self.dialect
        if not isinstance(schema, dict):
            self.refuse(json.dumps(schema), path, "a boolean schema")
        if dialect.all_required and depth > STRICT_MAX_NESTING:
            raise OutputSchemaError(
                f"the output schema nests objects deeper than {STRICT_MAX_NESTING} levels at "
                f"{path}; {dialect.vendor} takes at most {STRICT_MAX_NESTING}"
            )
        schema = self.merged_all_of(schema, path)
        out: JSONObject = {}
        notes: list[str] = []
        for key, value in schema.items():
            if key == "oneOf":
                key = "anyOf"  # every dialect here takes anyOf; Grove checks "exactly one"
            if key in dialect.refused:
                self.refuse(key, path)
            elif key in ANNOTATIONS:
                continue
            elif key == "format" and not self.format_kept(value):
                notes.append(f"format={value}")
            elif (
                key == "minItems"
                and dialect.min_items is not None
                and value not in (dialect.min_items)
            ):
                notes.append(f"minItems={value}")
            elif key == "const" and dialect.const_as_enum:
                out["enum"] = [value]
            elif key in dialect.noted or (key in _VALIDATION_ONLY and key not in dialect.kept):
                notes.append(f"{key}={json.dumps(value)}")
            elif key in dialect.kept:
                out[key] = self.child(key, value, path, depth)
        if "enum" in out and isinstance(out["enum"], list):
            self.enum_values += len(out["enum"])
        if "$ref" in out:
            self.check_ref(str(out["$ref"]), path)
            if len(out) > 1 and dialect.closed:
                # $ref takes no siblings in strict mode; anyOf does (as pydantic-ai does it).
                out["anyOf"] = [{"$ref": out.pop("$ref")}]
        if out.get("type") == "object" or "properties" in out:
            self.close_object(out, schema, path)
        if notes:
            described = out.get("description")
            note = "(" + ", ".join(notes) + ")"
            out["description"] = f"{described} {note}" if described else note
        return out

    def merged_all_of(self, schema: JSONObject, path: str) -> JSONObject:
        """A one-entry allOf (pydantic's way of adding a description to a $ref) merged into
        its schema; more entries are refused where the dialect does not keep allOf."""
        all_of = schema.get("allOf")
        if not isinstance(all_of, list) or "allOf" in self.dialect.kept:
            return schema
        if len(all_of) != 1 or not isinstance(all_of[0], dict):
            self.refuse("allOf", path, "with more than one schema")
        rest = {key: value for key, value in schema.items() if key != "allOf"}
        return {**all_of[0], **rest}

    def format_kept(self, value: object) -> bool:
        formats = self.dialect.string_formats
        return formats is None or value in formats

    def child(self, key: str, value: Any, path: str, depth: int) -> Any:
        if key == "properties" and isinstance(value, dict):
            self.properties += len(value)
            return {
                name: self.node(item, f"{path}/properties/{name}", depth + 1)
                for name, item in value.items()
            }
        if key in ("$defs", "definitions") and isinstance(value, dict):
            return {
                name: self.node(item, f"{path}/{key}/{name}", 1) for name, item in value.items()
            }
        if key == "items" and isinstance(value, dict):
            return self.node(value, f"{path}/items", depth + 1)
        if key == "items" and isinstance(value, bool):
            if not value:
                return False
            self.refuse("items", path, "true: items of any kind")
        if key in ("anyOf", "allOf", "prefixItems") and isinstance(value, list):
            return [
                self.node(item, f"{path}/{key}/{index}", depth + 1)
                for index, item in enumerate(value)
            ]
        if key == "additionalProperties" and isinstance(value, dict):
            return self.node(value, f"{path}/additionalProperties", depth + 1)
        return value

    def check_ref(self, ref: str, path: str) -> None:
        if ref != "#" and LOCAL_DEFINITION.fullmatch(ref) is None:
            self.refuse("$ref", path, f"{ref!r}: only #, #/$defs/NAME and #/definitions/NAME")

    def close_object(self, out: JSONObject, given: JSONObject, path: str) -> None:
        if not self.dialect.closed:
            return
        extra = given.get("additionalProperties", False)
        free = "list its keys as properties"
        if extra is not False:
            self.refuse("additionalProperties", path, "an object with free keys", free)
        properties: JSONObject = out.setdefault("properties", {})
        if not properties and "additionalProperties" not in given:
            self.refuse("additionalProperties", path, "an object without properties", free)
        out["additionalProperties"] = False
        if not self.dialect.all_required:
            return
        required = set(given.get("required") or [])
        for name, item in properties.items():
            if name not in required:
                properties[name] = nullable(item)
        out["required"] = list(properties)


def nullable(schema: JSONObject) -> JSONObject:
    """`schema` that also accepts null: how OpenAI's strict mode says "optional"."""
    if accepts_null(schema):
        return schema
    kind = schema.get("type")
    if isinstance(kind, str) and "anyOf" not in schema:
        widened: JSONObject = {**schema, "type": [kind, "null"]}
        if isinstance(schema.get("enum"), list):
            widened["enum"] = [*schema["enum"], None]
        return widened
    if isinstance(kind, list) and "anyOf" not in schema:
        widened = {**schema, "type": [*kind, "null"]}
        if isinstance(schema.get("enum"), list):
            widened["enum"] = [*schema["enum"], None]
        return widened
    return {"anyOf": [schema, {"type": "null"}]}


def accepts_null(schema: JSONObject) -> bool:
    kind = schema.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return "enum" not in schema or None in schema["enum"]
    branches = schema.get("anyOf") or schema.get("oneOf")
    return isinstance(branches, list) and any(
        isinstance(branch, dict) and branch.get("type") == "null" for branch in branches
    )


def provider_refusal(schema: JSONObject, provider: ProviderName) -> str | None:
    """Why `provider` would refuse `schema` (checked), or None. Only OpenAI's strict mode
    refuses here: Anthropic answers a schema its structured outputs cannot take through a
    forced final tool, Gemini takes what its subset lacks as notes."""
    if provider != "openai":
        return None
    try:
        for_provider(schema, provider)
    except OutputSchemaError as exc:
        return str(exc)
    return None


def without_optional_nulls(value: Any, schema: JSONObject) -> Any:
    """`value` without the nulls that strict mode's optional properties came back as: a
    property left out of `required` whose schema does not itself accept null is dropped
    when null, so the schema as given (and its defaults) reads the answer."""
    return _Pruner(schema).prune(value, schema, 0)


class _Pruner:
    MAX_DEPTH = 64

    def __init__(self, root: JSONObject) -> None:
        self.root = root

    def resolve(self, schema: Any) -> Any:
        for _ in range(16):  # a chain of references, bounded
            if not isinstance(schema, dict) or not isinstance(schema.get("$ref"), str):
                return schema
            ref = schema["$ref"]
            if ref == "#":
                schema = self.root
                continue
            match = LOCAL_DEFINITION.fullmatch(ref)
            definitions = self.root.get(match[1]) if match else None
            if not match or not isinstance(definitions, dict):
                return schema
            schema = definitions.get(match[2])
        return schema

    def prune(self, value: Any, schema: Any, depth: int) -> Any:
        schema = self.resolve(schema)
        if depth > self.MAX_DEPTH or not isinstance(schema, dict):
            return value
        if isinstance(value, dict) and isinstance(schema.get("properties"), dict):
            properties: dict[str, Any] = schema["properties"]
            required = set(schema.get("required") or [])
            kept: dict[str, Any] = {}
            for key, item in value.items():
                inner = self.resolve(properties.get(key))
                optional = item is None and key in properties and key not in required
                if optional and not (isinstance(inner, dict) and accepts_null(inner)):
                    continue
                kept[key] = self.prune(item, inner, depth + 1) if key in properties else item
            return kept
        if isinstance(value, list) and isinstance(schema.get("items"), dict):
            return [self.prune(item, schema["items"], depth + 1) for item in value]
        return value
