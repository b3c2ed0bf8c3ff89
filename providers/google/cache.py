"""Gemini's explicit cache: a `cachedContents` entry holding a shared prefix (system prompt,
tools, contents), made once and named by every request that shares it, deleted after.

Calls through an agent-less `HTTPProvider` of the google wire (its client and credentials);
the requests that reference an entry are built in request.py.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import quote

import httpx

from grove.providers.base import JSONObject, Request
from grove.providers.errors import ProviderConnectionError, ProviderProtocolError
from grove.providers.google.request import build_body, prefix_fields
from grove.providers.http import HTTPProvider, join_url
from grove.providers.wirejson import json_int, json_object, json_str

CACHES_PATH = "/v1beta/cachedContents"


@dataclass(frozen=True, kw_only=True, slots=True)
class CachedContent:
    """An entry the provider made: its name (`cachedContents/...`) and the tokens it holds."""

    name: str
    tokens: int


def cached_content_body(request: Request, ttl_s: int) -> JSONObject:
    """What `POST cachedContents` takes for everything `request` would send before its reply."""
    plain = replace(request, cache=None)
    body, _ = build_body(plain)
    return {
        "model": f"models/{request.model}",
        "contents": body["contents"],
        **prefix_fields(plain.system, plain.tools),
        "ttl": f"{ttl_s}s",
    }


async def create_cached_content(
    provider: HTTPProvider, request: Request, ttl_s: int
) -> CachedContent:
    """Make an entry of `request`'s system prompt, tools and messages, kept `ttl_s` seconds."""
    answer = await _call(provider, "POST", CACHES_PATH, cached_content_body(request, ttl_s))
    name = json_str(answer, "name")
    if not name or not name.startswith("cachedContents/"):
        raise ProviderProtocolError(
            f"Gemini made a cached content without a usable name: {name!r}", provider="google"
        )
    tokens = json_int(json_object(answer, "usageMetadata"), "totalTokenCount")
    return CachedContent(name=name, tokens=tokens)


async def extend_cached_content(provider: HTTPProvider, name: str, ttl_s: int) -> None:
    """Keep an entry `ttl_s` seconds from now."""
    await _call(provider, "PATCH", f"/v1beta/{_quoted(name)}?updateMask=ttl", {"ttl": f"{ttl_s}s"})


async def delete_cached_content(provider: HTTPProvider, name: str) -> None:
    await _call(provider, "DELETE", f"/v1beta/{_quoted(name)}", None)


def _quoted(name: str) -> str:
    return quote(name, safe="/")


async def _call(
    provider: HTTPProvider, method: str, path: str, body: JSONObject | None
) -> dict[str, Any]:
    endpoint = provider.endpoint()
    headers = {"x-goog-api-key": endpoint.api_key}
    try:
        response = await provider.client.request(
            method, join_url(endpoint.base_url, path), headers=headers, json=body
        )
    except httpx.TransportError as exc:
        raise ProviderConnectionError(
            f"cannot reach google at {endpoint.base_url}: {type(exc).__name__}", provider="google"
        ) from exc
    if response.status_code >= 400:
        raise provider.wire.map_error(response.status_code, response.headers, response.content)
    try:
        data = response.json() if response.content else {}
    except ValueError as exc:
        raise ProviderProtocolError(
            f"Gemini answered {method} {path.split('?')[0]} with no JSON", provider="google"
        ) from exc
    return data if isinstance(data, dict) else {}
