"""Lenient readers for vendor JSON fields, and the masking of anything shaped like an API key.

Shared by every wire module; nothing here knows which vendor a field belongs to.
"""

from __future__ import annotations

import re

from providers.base import JSONObject

# Anthropic `sk-ant-...`, OpenAI `sk-...` / `rk-...`: a server may echo one back in an error.
_SK_KEY_SHAPE = re.compile(r"\b(?:sk|rk)-[A-Za-z0-9_*\-]{4,}")
# Google API keys.
_GOOGLE_KEY_SHAPE = re.compile(r"AIza[0-9A-Za-z_\-]{30,}")


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
