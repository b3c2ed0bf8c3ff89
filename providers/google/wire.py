"""The Gemini wire (`POST /v1beta/models/{model}:streamGenerateContent?alt=sse`): `GoogleWire`.

Ties request building (request.py), event mapping (stream.py) and error mapping (errors.py) to
the HTTP base; the API key travels only in the `x-goog-api-key` header, never in the URL.
"""

from __future__ import annotations

from dataclasses import replace
from urllib.parse import quote

import httpx

from grove.providers import cache_features
from grove.providers.base import ProviderName, Request
from grove.providers.errors import ProviderHTTPError
from grove.providers.google import PROVIDER
from grove.providers.google.errors import map_error
from grove.providers.google.request import build_body, cached_content_of
from grove.providers.google.stream import GeminiStreamParser
from grove.providers.http import Endpoint, PreparedRequest


def stream_path(model: str) -> str:
    return f"/v1beta/models/{quote(model, safe='')}:streamGenerateContent?alt=sse"


class GoogleWire:
    """The `Wire` for Gemini (Developer API, API-key auth)."""

    provider: ProviderName = PROVIDER

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
        return map_error(status, headers, body)

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
