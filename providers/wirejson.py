"""Lenient readers for vendor JSON fields, and the masking of anything shaped like an API key.

Shared by every wire module; nothing here knows which vendor a field belongs to.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from providers.base import JSONObject

# Anthropic `sk-ant-...`, OpenAI `sk-...` / `rk-...`: a server may echo one back in an error.
_SK_KEY_SHAPE = re.compile(r"\b(?:sk|rk)-[A-Za-z0-9_*\-]{4,}")
# Google API keys.
_GOOGLE_KEY_SHAPE = re.compile(r"AIza[0-9A-Za-z_\-]{30,}")


def loads(text: str) -> Any:
    """`json.loads` for what a server or a model sends: a number too large for a float
    (`1e999`) stays its text instead of becoming infinity, which no later JSON could carry;
    `NaN` and `Infinity`, which are not JSON, are refused (ValueError)."""
    return json.loads(text, parse_float=_finite_or_text, parse_constant=_not_json)


def _finite_or_text(text: str) -> float | str:
    value = float(text)
    return value if math.isfinite(value) else text


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def redact(text: str) -> str:
    """Mask every key-shaped substring, so no error text Grove builds carries one."""
    return _GOOGLE_KEY_SHAPE.sub("[redacted]", _SK_KEY_SHAPE.sub("sk-***", text))


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
