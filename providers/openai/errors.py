"""OpenAI's errors mapped, for both wires: a non-2xx answer and an error event (or a failed
response's `error`) inside a 200 stream, with whether another attempt may help.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from grove.providers.base import JSONObject
from grove.providers.errors import ProviderHTTPError, ProviderStreamError
from grove.providers.openai import PROVIDER
from grove.providers.retry import retry_after_from_headers
from grove.providers.secrets import mask
from grove.providers.wirejson import json_str

# Error codes (or types) that another attempt cannot fix: money and identity.
NOT_RETRYABLE_CODES = frozenset(
    {
        "insufficient_quota",
        "billing_hard_limit_reached",
        "billing_not_active",
        "invalid_api_key",
        "invalid_authentication",
        "authentication_error",
        "permission_denied",
        "account_deactivated",
        "access_terminated",
        "unsupported_country_region_territory",
    }
)
# Stream error codes (or types) that describe a passing condition on the server's side.
RETRYABLE_STREAM_CODES = frozenset(
    {
        "server_error",
        "internal_error",
        "rate_limit_exceeded",
        "rate_limit_error",
        "overloaded",
        "overloaded_error",
        "service_unavailable",
        "timeout",
    }
)
MAX_MESSAGE_CHARS = 500


def _error_fields(error: JSONObject) -> tuple[str | None, str]:
    """(kind, message) of an OpenAI error object: `code` if set, else `type`."""
    kind = json_str(error, "code") or json_str(error, "type")
    message = json_str(error, "message") or "no message"
    return kind, mask(message[:MAX_MESSAGE_CHARS])


def stream_error(error: JSONObject) -> ProviderStreamError:
    """An error event (or a failed response's `error`) as the error the parser raises.

    Retried only for a passing server condition, or when the server named no cause at all.
    """
    kind, message = _error_fields(error)
    codes = {json_str(error, "code"), json_str(error, "type")} - {None}
    retryable = not codes or (
        bool(codes & RETRYABLE_STREAM_CODES) and not codes & NOT_RETRYABLE_CODES
    )
    return ProviderStreamError(
        f"OpenAI stream error ({kind or 'unknown'}): {message}",
        provider=PROVIDER,
        kind=kind,
        retryable=retryable,
    )


def map_error(status: int, headers: httpx.Headers, body: bytes) -> ProviderHTTPError:
    """A non-2xx answer. 429 `insufficient_quota`, auth and billing errors are never retried."""
    text = mask(body.decode("utf-8", "replace"))
    error: JSONObject = {}
    try:
        data: Any = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        nested = data.get("error")
        error = nested if isinstance(nested, dict) else data
    if error:
        kind, message = _error_fields(error)
    else:
        kind, message = None, text.strip()[:MAX_MESSAGE_CHARS] or "empty body"
    codes = {json_str(error, "code"), json_str(error, "type")} - {None}
    retryable = False if codes & NOT_RETRYABLE_CODES else None
    label = f"{status} {kind}" if kind else str(status)
    return ProviderHTTPError(
        f"OpenAI HTTP {label}: {message}",
        provider=PROVIDER,
        status=status,
        body=text,
        kind=kind,
        retry_after=retry_after_from_headers(headers),
        retryable=retryable,
    )
