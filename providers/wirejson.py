"""Lenient readers for vendor JSON fields, and the JSON parsing every wire module uses.

Shared by every wire module; nothing here knows which vendor a field belongs to.
"""

from __future__ import annotations

import json
import math
from typing import Any

from grove.providers.base import JSONObject


def _finite_or_text(text: str) -> float | str:
    value = float(text)
    return value if math.isfinite(value) else text


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


# One decoder for every call, as `json.loads` keeps one for its defaults: given these
# options, `json.loads` would build a decoder (and its scanner) for each streamed event.
_DECODER = json.JSONDecoder(parse_float=_finite_or_text, parse_constant=_not_json)


def loads(text: str) -> Any:
    """`json.loads` for what a server or a model sends: a number too large for a float
    (`1e999`) stays its text instead of becoming infinity, which no later JSON could carry;
    `NaN` and `Infinity`, which are not JSON, are refused (ValueError)."""
    return _DECODER.decode(text)


def json_object(container: JSONObject, key: str) -> JSONObject:
    """`container[key]` when it is an object, else an empty one (absent, null, wrong type)."""
    value = container.get(key)
    return value if isinstance(value, dict) else {}


def json_str(container: JSONObject, key: str) -> str | None:
    value = container.get(key)
    return value if isinstance(value, str) else None


def json_int(container: JSONObject, key: str) -> int:
    """A token count; absent, null or non-integer values count as 0."""
    value = container.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
