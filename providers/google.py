"""The Gemini wire (`POST /v1beta/models/{model}:streamGenerateContent?alt=sse`): `GoogleWire`.

Ties request building (google_request) and event mapping (google_stream) to the HTTP base, and
maps HTTP errors; the API key travels only in the `x-goog-api-key` header, never in the URL.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import httpx

from providers.base import ProviderName, Request
from providers.errors import ProviderHTTPError
from providers.google_errors import GoogleError
from providers.google_request import build_body
from providers.google_stream import GeminiStreamParser
from providers.http import Endpoint, PreparedRequest
from providers.retry import retry_after_from_headers
from providers.secrets import mask


def stream_path(model: str) -> str:
    return f"/v1beta/models/{quote(model, safe='')}:streamGenerateContent?alt=sse"


class GoogleWire:
    """The `Wire` for Gemini (Developer API, API-key auth)."""

    provider: ProviderName = "google"

    def prepare(self, request: Request, endpoint: Endpoint) -> PreparedRequest:
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


def _error_object(text: str) -> Any:
    """The `error` member of the body; a streaming call may wrap it in a one-item list."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if isinstance(data, list) and data:
        data = data[0]
    return data.get("error") if isinstance(data, dict) else None
