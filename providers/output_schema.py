"""Output schemas as each provider takes them: the neutral checks, OpenAI's strict mode,
Anthropic's and Gemini's subsets, and answers' nulls read back. Pure functions, no I/O.

A constraint a provider's subset lacks (`minLength`, say) moves into the description, where
the model reads it, and Grove's own validation keeps it; a shape the subset cannot express
(`not`, free keys in strict mode) is refused by name, in one line, before anything is sent.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass
from typing import Any, NoReturn

from grove.providers.base import JSONObject, ProviderName
from grove.providers.errors import OutputSchemaError, PatternError
from grove.providers.linear_regex import compile_re2

MAX_SCHEMA_CHARS = 200_000
MAX_SCHEMA_DEPTH = 64  # JSON nesting of the schema document itself
# OpenAI's limits on one strict schema.
STRICT_MAX_NESTING = 10
STRICT_MAX_PROPERTIES = 5_000
STRICT_MAX_ENUM_VALUES = 1_000
# Schemas found good, as JSON text: checking one (jsonschema's meta-schema) takes milliseconds,
# and a batch's thousand tasks, or its chunks of forks, bring the same one again and again.
_CHECKED: dict[str, str] = {}
_CHECKED_LOCK = threading.Lock()  # the service checks schemas in several threads at once
CHECKED_KEPT = 256
_NAME_FORBIDDEN = re.compile(r"[^A-Za-z0-9_-]+")
_LOCAL_DEFINITION = re.compile(r"#/(\$defs|definitions)/([^/]+)")


# Keywords that only annotate: dropped from what is sent (Grove validates with the schema
# as given).
ANNOTATIONS = frozenset(
    {
        "$schema",
        "$id",
        "$comment",
        "$anchor",
        "default",
        "examples",
        "deprecated",
        "readOnly",
        "writeOnly",
        "discriminator",
        "contentEncoding",
        "contentMediaType",
    }
)


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
    root = _inline_root_ref(json.loads(text))
    _check_patterns(root)
    _check_references(root)
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


def _subschemas(root: JSONObject) -> list[tuple[str, JSONObject]]:
    """Every schema object in `root` with its path (values of annotations, `enum` and `const`
    are data, not schemas), walked without recursion."""
    found: list[tuple[str, JSONObject]] = []
    pending: list[tuple[str, object]] = [("", root)]
    while pending:
        path, item = pending.pop()
        if isinstance(item, list):
            pending.extend((f"{path}/{index}", child) for index, child in enumerate(item))
        elif isinstance(item, dict):
            found.append((path, item))
            pending.extend(
                (f"{path}/{key}", child)
                for key, child in item.items()
                if key not in ANNOTATIONS and key not in ("enum", "const")
            )
    return found


def _check_patterns(root: JSONObject) -> None:
    """Every `pattern` and `patternProperties` key compiled by RE2, which answers are checked
    with (linear time, no backtracking); OutputSchemaError names one it cannot take."""
    pattern_properties = unevaluated = False
    for path, schema in _subschemas(root):
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


# Keywords whose subschemas apply to the same value (the others go into a part of it).
_IN_PLACE_LISTS = ("allOf", "anyOf", "oneOf")
_IN_PLACE = ("not", "if", "then", "else")


def _check_references(root: JSONObject) -> None:
    """Every `$ref` local (`#` or `#/a/json/pointer`) and naming a schema; none that leads
    back to itself without going into a part of the answer (checking an answer against it
    would never end). OutputSchemaError names the first that fails."""
    refs = ["#"]
    for path, schema in _subschemas(root):
        for keyword in ("$dynamicRef", "$recursiveRef"):
            if keyword in schema:
                raise OutputSchemaError(
                    f"the output schema uses {keyword} at {path or '/'}; use $ref"
                )
        ref = schema.get("$ref")
        if isinstance(ref, str) and not isinstance(_pointed(root, ref), dict):
            raise OutputSchemaError(
                f"the output schema's $ref {ref!r} at {path or '/'} names no schema in it "
                "(Grove resolves only # and #/json/pointer references)"
            )
        if isinstance(ref, str):
            refs.append(ref)
    edges: dict[str, list[str]] = {}
    pending = refs
    while pending:
        ref = pending.pop()
        if ref in edges:
            continue
        edges[ref] = _refs_in_place(_pointed(root, ref))
        pending.extend(edges[ref])
    loop = _first_cycle(edges)
    if loop is not None:
        raise OutputSchemaError(
            f"the output schema's $ref {loop!r} leads back to itself without going into a "
            "property or an item of the answer: checking it would never end"
        )


def _pointed(root: JSONObject, ref: str) -> object:
    """What the local reference `ref` names in `root`, or None."""
    if ref == "#":
        return root
    if not ref.startswith("#/"):
        return None
    item: object = root
    for step in ref[2:].split("/"):
        step = step.replace("~1", "/").replace("~0", "~")
        if isinstance(item, dict):
            item = item.get(step)
        elif isinstance(item, list) and step.isdigit() and int(step) < len(item):
            item = item[int(step)]
        else:
            return None
    return item


def _refs_in_place(schema: object) -> list[str]:
    """The `$ref`s that `schema` applies to the very value it checks (through allOf, anyOf,
    oneOf, not, if, then, else and dependentSchemas), not to a part of it."""
    found: list[str] = []
    pending = [schema]
    while pending:
        item = pending.pop()
        if not isinstance(item, dict):
            continue
        if isinstance(item.get("$ref"), str):
            found.append(item["$ref"])
        for keyword in _IN_PLACE_LISTS:
            if isinstance(item.get(keyword), list):
                pending.extend(item[keyword])
        pending.extend(item.get(keyword) for keyword in _IN_PLACE)
        if isinstance(item.get("dependentSchemas"), dict):
            pending.extend(item["dependentSchemas"].values())
    return found


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


def _inline_root_ref(schema: JSONObject) -> JSONObject:
    ref = schema.get("$ref")
    if not isinstance(ref, str):
        return schema
    match = _LOCAL_DEFINITION.fullmatch(ref)
    definitions = schema.get(match[1]) if match else None
    target = definitions.get(match[2]) if match and isinstance(definitions, dict) else None
    if not match or not isinstance(definitions, dict) or not isinstance(target, dict):
        raise OutputSchemaError(f"the output schema's root $ref {ref!r} names no definition")
    rest = {key: value for key, value in schema.items() if key != "$ref"}
    others = {name: value for name, value in definitions.items() if name != match[2]}
    if others:
        rest[match[1]] = others
    else:
        rest.pop(match[1])
    inlined: JSONObject = _rewrite_refs({**target, **rest}, ref)
    return inlined


def _rewrite_refs(value: Any, ref: str) -> Any:
    if isinstance(value, dict):
        return {
            key: "#" if key == "$ref" and item == ref else _rewrite_refs(item, ref)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_rewrite_refs(item, ref) for item in value]
    return value


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
            cycle = _reference_cycle(self.root)
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
        if ref != "#" and _LOCAL_DEFINITION.fullmatch(ref) is None:
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
    if _accepts_null(schema):
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


def _accepts_null(schema: JSONObject) -> bool:
    kind = schema.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return "enum" not in schema or None in schema["enum"]
    branches = schema.get("anyOf") or schema.get("oneOf")
    return isinstance(branches, list) and any(
        isinstance(branch, dict) and branch.get("type") == "null" for branch in branches
    )


def _reference_cycle(root: JSONObject) -> str | None:
    """A path to a `$ref` that leads back into itself, or None: a recursive schema."""
    definitions: dict[str, Any] = {}
    for key in ("$defs", "definitions"):
        found = root.get(key)
        if isinstance(found, dict):
            definitions.update({f"#/{key}/{name}": value for name, value in found.items()})
    definitions["#"] = root

    def refs_in(value: Any) -> set[str]:
        found: set[str] = set()
        pending = [value]
        while pending:
            item = pending.pop()
            if isinstance(item, dict):
                ref = item.get("$ref")
                if isinstance(ref, str):
                    found.add(ref)
                pending.extend(v for k, v in item.items() if k not in ("$defs", "definitions"))
            elif isinstance(item, list):
                pending.extend(item)
        return found

    return _first_cycle({name: refs_in(value) for name, value in definitions.items()})


def _first_cycle(edges: dict[str, Any]) -> str | None:
    """The first name in `edges` (name -> the names it leads to) that leads back to itself."""
    for start in edges:
        seen: set[str] = set()
        pending = list(edges[start])
        while pending:
            ref = pending.pop()
            if ref == start:
                return start
            if ref not in seen and ref in edges:
                seen.add(ref)
                pending.extend(edges[ref])
    return None


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
            match = _LOCAL_DEFINITION.fullmatch(ref)
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
                if optional and not (isinstance(inner, dict) and _accepts_null(inner)):
                    continue
                kept[key] = self.prune(item, inner, depth + 1) if key in properties else item
            return kept
        if isinstance(value, list) and isinstance(schema.get("items"), dict):
            return [self.prune(item, schema["items"], depth + 1) for item in value]
        return value


def one_line(text: str, limit: int = 300) -> str:
    """`text` on one line, at most `limit` characters."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"
