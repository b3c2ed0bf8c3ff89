"""The Anthropic Messages wire (`POST /v1/messages`, SSE): `AnthropicWire`, which ties request
building (request.py), event mapping (stream.py) and error mapping (errors.py) to the HTTP base.
"""

from __future__ import annotations

from dataclasses import replace

import httpx

from grove.providers import cache_features
from grove.providers.anthropic import PROVIDER
from grove.providers.anthropic.errors import map_error
from grove.providers.anthropic.request import MESSAGES_PATH, request_body, request_headers
from grove.providers.anthropic.stream import AnthropicStreamParser
from grove.providers.base import ProviderName, Request
from grove.providers.errors import ProviderHTTPError
from grove.providers.http import Endpoint, PreparedRequest

CACHE_FEATURE = "cache_control"


class AnthropicWire:
    """The `Wire` for `POST /v1/messages` with `stream: true`."""

    provider: ProviderName = PROVIDER

    def prepare(self, request: Request, endpoint: Endpoint) -> PreparedRequest:
        if cache_features.dropped(PROVIDER, endpoint.base_url, CACHE_FEATURE):
            request = replace(request, cache=None)
        body, warnings = request_body(request)
        return PreparedRequest(
            path=MESSAGES_PATH,
            headers=request_headers(endpoint.api_key),
            body=body,
            warnings=warnings,
        )

    def new_parser(self) -> AnthropicStreamParser:
        return AnthropicStreamParser()

    def map_error(self, status: int, headers: httpx.Headers, body: bytes) -> ProviderHTTPError:
        return map_error(status, headers, body)

    async def before_send(self, request: Request) -> None:
        """Nothing to wait for: this wire's caches need no key of their own."""

    def reply_began(self, began: bool) -> None:
        """Nothing to release."""

    def refused_feature(self, error: ProviderHTTPError) -> str | None:
        """`cache_control` when a 400 says the server does not take it (a compatible server)."""
        if error.status == 400 and CACHE_FEATURE in f"{error} {error.body}":
            return CACHE_FEATURE
        return None
