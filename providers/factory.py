"""Building a provider instance: the right wire, an endpoint resolved lazily, its own client.

Each call returns a new, unshared instance; an agent owns the one it gets.
"""

from __future__ import annotations

from typing import Literal

from grove.providers.base import ProviderName
from grove.providers.credentials import base_url as resolve_base_url
from grove.providers.credentials import load_api_key
from grove.providers.http import Endpoint, HTTPProvider, Wire
from grove.providers.retry import RetryPolicy
from grove.providers.secrets import remember_secret, remember_url_secrets

OpenAIAPI = Literal["responses", "chat"]


def wire_for(provider: ProviderName, openai_api: OpenAIAPI = "responses") -> Wire:
    if provider == "anthropic":
        from grove.providers.anthropic.wire import AnthropicWire

        return AnthropicWire()
    if provider == "openai":
        if openai_api == "chat":
            from grove.providers.openai.chat import OpenAIChatWire

            return OpenAIChatWire()
        from grove.providers.openai.responses import OpenAIResponsesWire

        return OpenAIResponsesWire()
    from grove.providers.google.wire import GoogleWire

    return GoogleWire()


def create_provider(
    provider: ProviderName,
    *,
    configured_base_url: str | None = None,
    endpoint: Endpoint | None = None,
    openai_api: OpenAIAPI = "responses",
    retry: RetryPolicy | None = None,
) -> HTTPProvider:
    """A provider whose key is loaded on its first request (env, then credentials.json).

    `endpoint` fixes URL and key outright (the simulator); otherwise the base URL comes from
    the environment, then `configured_base_url` (the config file), then the vendor's own.
    """

    def resolve() -> Endpoint:
        return resolve_endpoint(provider, configured_base_url, endpoint)

    return HTTPProvider(wire_for(provider, openai_api), resolve, retry=retry)


def resolve_endpoint(
    provider: ProviderName, configured_base_url: str | None, endpoint: Endpoint | None
) -> Endpoint:
    """Where and as whom a provider is called: `endpoint` outright (the simulator), else the
    base URL from the environment, then `configured_base_url`, then the vendor's own, and
    the key from the environment, then credentials.json (both remembered as secrets)."""
    if endpoint is not None:
        remember_secret(endpoint.api_key)
        remember_url_secrets(endpoint.base_url)
        return endpoint
    return Endpoint(
        base_url=resolve_base_url(provider, configured=configured_base_url),
        api_key=load_api_key(provider),
    )
