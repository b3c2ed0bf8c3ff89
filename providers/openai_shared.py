"""What both OpenAI wires share: the wire's frame (`OpenAIWire`: paths, headers, errors, the
`prompt_cache_key`), event JSON, and OpenAI's errors mapped.

Request bodies and stream events belong to openai_responses / openai_chat, never here.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from grove.providers import cache_features, wirejson
from grove.providers.base import JSONObject, OutputSchema, ProviderName, Request
from grove.providers.errors import ProviderHTTPError, ProviderProtocolError, ProviderStreamError
from grove.providers.http import Endpoint, PreparedRequest
from grove.providers.openai_cache import FEATURE, CacheKeys
from grove.providers.output_schema import for_provider
from grove.providers.retry import retry_after_from_headers
from grove.providers.secrets import mask
from grove.providers.sse import ServerSentEvent
from grove.providers.thinking import openai_warning
from grove.providers.wirejson import json_str

PROVIDER: ProviderName = "openai"

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


class OpenAIWire:
    """The frame of both OpenAI wires: a subclass names its `route` and builds its body."""

    provider: ProviderName = PROVIDER
    route: str  # "responses" or "chat/completions"

    def __init__(self) -> None:
        self.cache_keys = CacheKeys()

    def build(self, request: Request) -> JSONObject:
        raise NotImplementedError

    def prepare(self, request: Request, endpoint: Endpoint) -> PreparedRequest:
        """The body, with a `prompt_cache_key` when the request has a fork point (and the
        server has not refused one)."""
        body = self.build(request)
        if not cache_features.dropped(PROVIDER, endpoint.base_url, FEATURE):
            key = self.cache_keys.key_for(request)
            if key is not None:
                body["prompt_cache_key"] = key
        warning = openai_warning(request.model, request.thinking)
        return PreparedRequest(
            path=api_path(endpoint, self.route),
            headers=auth_headers(endpoint),
            body=body,
            warnings=(warning,) if warning else (),
        )

    def map_error(self, status: int, headers: httpx.Headers, body: bytes) -> ProviderHTTPError:
        return map_error(status, headers, body)

    def refused_feature(self, error: ProviderHTTPError) -> str | None:
        return refused_feature(error)

    async def before_send(self, request: Request) -> None:
        await self.cache_keys.admit(request)

    def reply_began(self, began: bool) -> None:
        self.cache_keys.began(began)


def api_path(endpoint: Endpoint, route: str) -> str:
    """`/v1/<route>`, or `/<route>` when the base URL already ends in `/v1` (SDK convention)."""
    if endpoint.base_url.rstrip("/").endswith("/v1"):
        return f"/{route}"
    return f"/v1/{route}"


def strict_format(output: OutputSchema) -> JSONObject:
    """The `json_schema` format both wires take (Responses `text.format`, Chat's
    `response_format.json_schema`): the schema made strict-compatible, strict on."""
    return {"name": output.name, "schema": for_provider(output.schema, PROVIDER), "strict": True}


def auth_headers(endpoint: Endpoint) -> dict[str, str]:
    return {"Authorization": f"Bearer {endpoint.api_key}", "Accept": "text/event-stream"}


def event_json(sse: ServerSentEvent) -> JSONObject:
    """The JSON object an SSE event carries, or ProviderProtocolError."""
    try:
        value: Any = wirejson.loads(sse.data)
    except ValueError as exc:
        raise ProviderProtocolError(
            f"OpenAI stream event is not JSON: {mask(sse.data[:80])!r}", provider=PROVIDER
        ) from exc
    if not isinstance(value, dict):
        raise ProviderProtocolError(
            f"OpenAI stream event is not a JSON object: {mask(sse.data[:80])!r}",
            provider=PROVIDER,
        )
    return value


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


def refused_feature(error: ProviderHTTPError) -> str | None:
    """`prompt_cache_key` when a 400 says the server does not take it (an OpenAI-compatible
    server that knows no such parameter), else None."""
    if error.status == 400 and "prompt_cache_key" in f"{error} {error.body}":
        return "prompt_cache_key"
    return None


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
