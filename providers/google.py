"""The Gemini wire (`POST /v1beta/models/{model}:streamGenerateContent?alt=sse`): `GoogleWire`.

Ties request building (google_request) and event mapping (google_stream) to the HTTP base, and
maps HTTP errors; the API key travels only in the `x-goog-api-key` header, never in the URL.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any
from urllib.parse import quote

import httpx

from grove.providers import cache_features
from grove.providers.base import ProviderName, Request
from grove.providers.errors import ProviderHTTPError
from grove.providers.google_errors import GoogleError
from grove.providers.google_request import build_body, cached_content_of
from grove.providers.google_stream import GeminiStreamParser
from grove.providers.http import Endpoint, PreparedRequest
from grove.providers.retry import retry_after_from_headers
from grove.providers.secrets import mask


def stream_path(model: str) -> str:
    return f"/v1beta/models/{quote(model, safe='')}:streamGenerateContent?alt=sse"


class GoogleWire:
    """The `Wire` for Gemini (Developer API, API-key auth)."""

    provider: ProviderName = "google"

    def __init__(self) -> None:
        self._referenced: str | None = None  # the cachedContents entry the last request named

    def prepare(self, request: Request, endpoint: Endpoint) -> PreparedRequest:
        cached = cached_content_of(request)
        if cached is not None and cache_features.dropped(self.provider, endpoint.base_url, cached):
            messages = cache_features.without_cached_content(request.messages, cached)
            request, cached = replace(request, messages=messages), None
        self._referenced = cached
        body, warnings = build_body(request)
        return PreparedRequest(
            path=stream_path(request.model),
            headers={"x-goog-api-key": endpoint.api_key, "accept": "text/event-stream"},
            body=body,
            warnings=warnings,
        )

    def new_parser(self) -> GeminiStreamParser:
        return GeminiStreamParser()

    def map_error(self, status: int, headers: httpx.Headers, body: bytes) -> ProviderHTTPError:
        """Google's error object: RetryInfo before retry-after headers; hard quotas never retry."""
        text = mask(body.decode("utf-8", "replace"))
        error = GoogleError.read(_error_object(text))
        retry_after = error.retry_delay
        if retry_after is None:
            retry_after = retry_after_from_headers(headers)
        return ProviderHTTPError(
            error.describe(f"HTTP {status}"),
            provider=self.provider,
            status=status,
            body=text,
            kind=error.status,
            retry_after=retry_after,
            retryable=error.retryable(status),
        )

    async def before_send(self, request: Request) -> None:
        """Nothing to wait for: this wire's caches need no key of their own."""

    def reply_began(self, began: bool) -> None:
        """Nothing to release."""

    def refused_feature(self, error: ProviderHTTPError) -> str | None:
        """The `cachedContents` entry the last request referenced, when the answer says it is
        gone or not usable (expired, deleted): the request goes again with the context."""
        if self._referenced is None or error.status not in (400, 403, 404):
            return None
        return self._referenced if "cachedcontent" in f"{error} {error.body}".lower() else None


def _error_object(text: str) -> Any:
    """The `error` member of the body; a streaming call may wrap it in a one-item list."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if isinstance(data, list) and data:
        data = data[0]
    return data.get("error") if isinstance(data, dict) else None
