"""Walking an output schema document: every subschema with its path, local `$ref`s resolved
and checked for loops, a root `$ref` inlined. Pure functions; the dialects are elsewhere.
"""

from __future__ import annotations

import re
from typing import Any

from grove.providers.base import JSONObject
from grove.providers.errors import OutputSchemaError

LOCAL_DEFINITION = re.compile(r"#/(\$defs|definitions)/([^/]+)")


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


def subschemas(root: JSONObject) -> list[tuple[str, JSONObject]]:
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


# Keywords whose subschemas apply to the same value (the others go into a part of it).
_IN_PLACE_LISTS = ("allOf", "anyOf", "oneOf")
_IN_PLACE = ("not", "if", "then", "else")


def check_references(root: JSONObject) -> None:
    """Every `$ref` local (`#` or `#/a/json/pointer`) and naming a schema; none that leads
    back to itself without going into a part of the answer (checking an answer against it
    would never end). OutputSchemaError names the first that fails."""
    refs = ["#"]
    for path, schema in subschemas(root):
        for keyword in ("$dynamicRef", "$recursiveRef"):
            if keyword in schema:
                raise OutputSchemaError(
                    f"the output schema uses {keyword} at {path or '/'}; use $ref"
                )
        ref = schema.get("$ref")
        if isinstance(ref, str) and not isinstance(pointed(root, ref), dict):
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
        edges[ref] = _refs_in_place(pointed(root, ref))
        pending.extend(edges[ref])
    loop = _first_cycle(edges)
    if loop is not None:
        raise OutputSchemaError(
            f"the output schema's $ref {loop!r} leads back to itself without going into a "
            "property or an item of the answer: checking it would never end"
        )


def pointed(root: JSONObject, ref: str) -> object:
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


def inline_root_ref(schema: JSONObject) -> JSONObject:
    ref = schema.get("$ref")
    if not isinstance(ref, str):
        return schema
    match = LOCAL_DEFINITION.fullmatch(ref)
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


def reference_cycle(root: JSONObject) -> str | None:
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
