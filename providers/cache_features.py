"""Cache features a server refused (an OpenAI-compatible server without `prompt_cache_key`,
say): dropped for that provider and server in this process, once, with one warning.

Process-wide, like the TLS context: every agent of a host stops sending what one was refused.
"""

from __future__ import annotations

import threading

from grove.providers.base import CachePoint, Message, ProviderName, Request

_dropped: set[tuple[ProviderName, str, str]] = set()
_lock = threading.Lock()


def drop(provider: ProviderName, base_url: str, feature: str) -> bool:
    """Stop sending `feature` to this server; False when it was dropped already."""
    with _lock:
        entry = (provider, base_url, feature)
        if entry in _dropped:
            return False
        _dropped.add(entry)
        return True


def dropped(provider: ProviderName, base_url: str, feature: str) -> bool:
    return (provider, base_url, feature) in _dropped


def dropped_text(provider: ProviderName, base_url: str, feature: str) -> str:
    """The one warning a dropped feature gets."""
    return (
        f"{provider} at {base_url} refused {feature}; Grove sends its requests there without "
        "it from now on (caching may save less)"
    )


def last_cache_point(request: Request) -> CachePoint | None:
    """The nearest fork point of a request that asks for caching (None: none, or no caching)."""
    if request.cache is None:
        return None
    for message in reversed(request.messages):
        for part in reversed(message.parts):
            if isinstance(part, CachePoint):
                return part
    return None


def without_cached_content(messages: tuple[Message, ...], name: str) -> tuple[Message, ...]:
    """`messages` with every reference to the provider-side cache `name` taken out."""
    return tuple(
        Message(
            role=message.role,
            parts=tuple(
                CachePoint(key=part.key)
                if isinstance(part, CachePoint) and part.cached_content == name
                else part
                for part in message.parts
            ),
        )
        for message in messages
    )
