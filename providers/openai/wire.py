"""What both OpenAI wires share: the wire's frame (`OpenAIWire`: paths, headers, the
`prompt_cache_key`) and event JSON. OpenAI's errors are mapped in errors.py.

Request bodies and stream events belong to responses / chat and their streams, never here.
"""

from __future__ import annotations

from typing import Any

import httpx

from grove.providers import cache_features, wirejson
from grove.providers.base import JSONObject, OutputSchema, ProviderName, Request
from grove.providers.errors import ProviderHTTPError, ProviderProtocolError
from grove.providers.http import Endpoint, PreparedRequest
from grove.providers.openai import PROVIDER
from grove.providers.openai.cache import FEATURE, CacheKeys
from grove.providers.openai.errors import map_error
from grove.providers.output_dialects import for_provider
from grove.providers.secrets import mask
from grove.providers.sse import ServerSentEvent
from grove.providers.thinking import openai_warning


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


def refused_feature(error: ProviderHTTPError) -> str | None:
    """`prompt_cache_key` when a 400 says the server does not take it (an OpenAI-compatible
    server that knows no such parameter), else None."""
    if error.status == 400 and "prompt_cache_key" in f"{error} {error.body}":
        return "prompt_cache_key"
    return None
