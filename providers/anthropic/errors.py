"""Anthropic's errors mapped: a non-2xx answer and an `error` event inside a 200 stream, each
to Grove's error with Anthropic's type, clipped message and whether another attempt may help.
"""

from __future__ import annotations

import json
import re
from typing import Any

import httpx

from grove.providers.anthropic import PROVIDER
from grove.providers.base import JSONObject
from grove.providers.errors import ProviderHTTPError, ProviderStreamError
from grove.providers.retry import retry_after_from_headers
from grove.providers.secrets import mask
from grove.providers.wirejson import json_object, json_str

# Stream error types that describe a passing condition on Anthropic's side.
RETRYABLE_STREAM_ERRORS = frozenset(
    {"overloaded_error", "api_error", "rate_limit_error", "timeout_error"}
)
# Error types that another attempt cannot fix: identity, money, or the request itself.
NOT_RETRYABLE_ERRORS = frozenset(
    {
        "authentication_error",
        "permission_error",
        "billing_error",
        "invalid_request_error",
        "not_found_error",
        "request_too_large",
    }
)
# Spend limits and empty credit balances arrive under several types (even rate_limit_error).
_MONEY_PATTERN = re.compile(
    r"spend[ _-]?limit|usage[ _-]?limit|credit[ _-]?balance|billing|quota", re.IGNORECASE
)
MAX_MESSAGE_CHARS = 500


def stream_error(error: JSONObject) -> ProviderStreamError:
    """An `error` event after HTTP 200: retried only when Anthropic is overloaded or failing."""
    kind = json_str(error, "type")
    message = _clip(json_str(error, "message") or "no message")
    return ProviderStreamError(
        f"anthropic: {kind or 'unknown_error'}: {message}",
        provider=PROVIDER,
        kind=kind,
        retryable=kind in RETRYABLE_STREAM_ERRORS,
    )


def map_error(status: int, headers: httpx.Headers, body: bytes) -> ProviderHTTPError:
    """A non-2xx answer. Identity, billing, spend limits and bad requests are never retried."""
    text = mask(body.decode("utf-8", "replace"))
    error = _error_object(text)
    kind = json_str(error, "type")
    code = json_str(json_object(error, "details"), "error_code")
    if error:
        message = _clip(json_str(error, "message") or "no message")
    else:
        message = _clip(text.strip()) or "empty body"
    money = any(_MONEY_PATTERN.search(value) for value in (kind, code, message) if value)
    retryable = False if money or kind in NOT_RETRYABLE_ERRORS else None
    label = f"{status} {kind}" if kind else str(status)
    if code:
        label += f" ({code})"
    return ProviderHTTPError(
        f"anthropic: {label}: {message}",
        provider=PROVIDER,
        status=status,
        body=text,
        kind=kind,
        retry_after=retry_after_from_headers(headers),
        retryable=retryable,
    )


def _error_object(text: str) -> JSONObject:
    """The `error` of `{"type": "error", "error": {...}}`, or {} for any other body."""
    try:
        data: Any = json.loads(text)
    except ValueError:
        return {}
    return json_object(data, "error") if isinstance(data, dict) else {}


def _clip(text: str) -> str:
    return text[:MAX_MESSAGE_CHARS]
