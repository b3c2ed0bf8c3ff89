"""The HTTP provider base: one httpx client per instance, SSE decoding, retries, assembly.

Wire modules supply a `Wire` (request building, event mapping, error mapping); this module
owns every network call and the retry loop, and never looks inside a vendor's JSON.
"""

from __future__ import annotations

import asyncio
import itertools
import ssl
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Any, Protocol

import certifi
import httpx

from grove.providers import cache_features, preserved_thinking
from grove.providers.accumulate import TurnAccumulator
from grove.providers.aionet import AsyncioTransport
from grove.providers.base import AssistantTurn, ProviderName, Request
from grove.providers.errors import (
    ProviderConnectionError,
    ProviderError,
    ProviderHTTPError,
    StreamBroken,
)
from grove.providers.pricing import cost_usd
from grove.providers.ratelimit import remaining_from_headers
from grove.providers.retry import RetryPolicy
from grove.providers.sse import ServerSentEvent, SSEDecoder
from grove.providers.stream_events import Finished, ProviderWarning, Retrying, Sending, StreamEvent
from grove.providers.tier_rules import FLEX_READ_TIMEOUT_S, flex_unavailable

DEFAULT_TIMEOUT = httpx.Timeout(connect=10.0, read=180.0, write=30.0, pool=30.0)
FLEX_TIMEOUT = httpx.Timeout(connect=10.0, read=FLEX_READ_TIMEOUT_S, write=30.0, pool=30.0)
FLEX_FALLBACK_TEXT = "no flex capacity after {tries} tries: sent on the standard tier instead"
FLEX_REFUSED_TEXT = (
    "{provider} had no flex capacity in {tries} tries ({error}); set [tiers] flex_fallback = "
    "true to send such requests on the standard tier, or run the agent on another tier"
)
_instance_numbers = itertools.count(1)


@cache
def shared_ssl_context() -> ssl.SSLContext:
    """One TLS context per process: building one loads the CA bundle (about 16 ms)."""
    return ssl.create_default_context(cafile=certifi.where())


def new_client(timeout: httpx.Timeout = DEFAULT_TIMEOUT) -> httpx.AsyncClient:
    """A private client on the process's shared TLS context (about 55 microseconds), its
    connections on plain asyncio streams (providers/aionet.py)."""
    return httpx.AsyncClient(transport=AsyncioTransport(shared_ssl_context()), timeout=timeout)


@dataclass(frozen=True, kw_only=True, slots=True)
class Endpoint:
    """Where and as whom to call: the base URL and the API key, loaded when first needed."""

    base_url: str
    api_key: str = field(repr=False)


@dataclass(frozen=True, kw_only=True, slots=True)
class PreparedRequest:
    path: str
    headers: dict[str, str] = field(repr=False)
    body: dict[str, Any]
    warnings: tuple[str, ...] = ()


class WireParser(Protocol):
    """Translates one attempt's SSE events into Grove stream events."""

    def feed(self, event: ServerSentEvent) -> list[StreamEvent]:
        """May raise `ProviderStreamError` for an error event in the stream."""
        ...

    def finish(self) -> list[StreamEvent]:
        """The body ended cleanly; return what the last events imply."""
        ...


class Wire(Protocol):
    """One vendor's wire protocol."""

    provider: ProviderName

    def prepare(self, request: Request, endpoint: Endpoint) -> PreparedRequest: ...

    def new_parser(self) -> WireParser: ...

    def map_error(self, status: int, headers: httpx.Headers, body: bytes) -> ProviderHTTPError: ...

    def refused_feature(self, error: ProviderHTTPError) -> str | None:
        """The cache feature `error` says the server does not take, if it says so."""
        ...

    async def before_send(self, request: Request) -> None:
        """Called before each attempt: may wait for a cache it shares to be written first."""
        ...

    def reply_began(self, began: bool) -> None:
        """The attempt's reply began (its first content: True), or it ended without (False)."""
        ...


class HTTPProvider:
    """A `Provider` over HTTP + SSE. One instance per agent; it owns its client."""

    def __init__(
        self,
        wire: Wire,
        endpoint: Callable[[], Endpoint],
        *,
        retry: RetryPolicy | None = None,
        timeout: httpx.Timeout = DEFAULT_TIMEOUT,
    ) -> None:
        self.name: ProviderName = wire.provider
        self.instance = next(_instance_numbers)  # unique in this process, never reused
        self.wire = wire
        self._endpoint_source = endpoint
        self._endpoint: Endpoint | None = None
        self.retry = retry or RetryPolicy()
        self._timeout = timeout
        self._client: httpx.AsyncClient | None = None

    @property
    def client(self) -> httpx.AsyncClient:
        """This instance's own client, built on first use (and again after `release`)."""
        if self._client is None:
            self._client = new_client(self._timeout)
        return self._client

    def endpoint(self) -> Endpoint:
        """Credentials are loaded lazily, on the first request (MissingCredentialsError)."""
        if self._endpoint is None:
            self._endpoint = self._endpoint_source()
        return self._endpoint

    async def release(self) -> None:
        """Drop the connection pool; the next request builds a new one."""
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    async def aclose(self) -> None:
        await self.release()

    async def complete(self, request: Request) -> AssistantTurn:
        async for event in self.stream(request):
            if isinstance(event, Finished):
                return event.turn
        raise StreamBroken("stream ended without a reply", provider=self.name)

    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        attempt = 0
        refused: set[str] = set()  # cache features this call was refused and went on without
        request, prefix = preserved_thinking.bound(self.name, request)
        unbound: str | None = None  # where thinking was left out after a 400 said it was bound
        while True:
            attempt += 1
            accumulator = TurnAccumulator(self.name, request.model)
            try:
                async for event in self._attempt(request, accumulator, attempt):
                    yield event
            except ProviderError as exc:
                retry = (
                    None if unbound or prefix is None else preserved_thinking.unbound(request, exc)
                )
                if retry is not None:
                    request, unbound = retry
                    request, prefix = preserved_thinking.bound(self.name, request)
                    yield ProviderWarning(text=preserved_thinking.dropped_text(unbound))
                    continue
                feature = self._refused_feature(exc, accumulator, refused)
                if feature is not None:
                    refused.add(feature)
                    base_url = self.endpoint().base_url
                    if cache_features.drop(self.name, base_url, feature):
                        text = cache_features.dropped_text(self.name, base_url, feature)
                        yield ProviderWarning(text=text)
                    continue
                if (
                    accumulator.content_seen
                    or not exc.retryable
                    or attempt >= self.retry.max_attempts
                ):
                    if accumulator.content_seen or not flex_unavailable(
                        self.name, request.tier, exc
                    ):
                        raise
                    request = self._on_standard(request, exc, attempt)
                    yield ProviderWarning(text=FLEX_FALLBACK_TEXT.format(tries=attempt))
                    attempt = 0
                    continue
                delay = self.retry.delay(attempt, exc.retry_after)
                yield Retrying(attempt=attempt, delay_s=delay, reason=str(exc))
                await asyncio.sleep(delay)
                continue
            cost = cost_usd(accumulator.model, accumulator.usage, tier=request.tier)
            turn = replace(accumulator.turn(cost), tier=request.tier)
            turn = preserved_thinking.stamped(turn, prefix)
            if unbound is not None:
                turn = replace(turn, thinking_dropped=unbound)
            yield Finished(turn=turn)
            return

    def _on_standard(self, request: Request, exc: ProviderError, tries: int) -> Request:
        """`request`, refused on flex for want of capacity `tries` times, on the standard
        tier when `[tiers] flex_fallback` says so; else the refusal, saying what would help."""
        if not self.retry.flex_fallback:
            raise ProviderError(
                FLEX_REFUSED_TEXT.format(provider=self.name, tries=tries, error=exc),
                provider=self.name,
            ) from exc
        return replace(request, tier="standard")

    def _refused_feature(
        self, exc: ProviderError, accumulator: TurnAccumulator, refused: set[str]
    ) -> str | None:
        """The cache feature a refusal names, to go on without (once per feature a call)."""
        if not isinstance(exc, ProviderHTTPError) or accumulator.content_seen:
            return None
        feature = self.wire.refused_feature(exc)
        return None if feature in refused else feature

    async def _attempt(
        self, request: Request, accumulator: TurnAccumulator, attempt: int
    ) -> AsyncIterator[StreamEvent]:
        endpoint = self.endpoint()
        await self.wire.before_send(request)
        began = False  # the wire hears once, whether the reply began or the attempt failed
        try:
            prepared = self.wire.prepare(request, endpoint)
            for text in prepared.warnings:
                warning = ProviderWarning(text=text)
                accumulator.add(warning)
                if attempt == 1:
                    yield warning
            url = join_url(endpoint.base_url, prepared.path)
            parser = self.wire.new_parser()
            decoder = SSEDecoder()
            yield Sending(attempt=attempt)
            # A flex request may wait for capacity before its first byte: its own read timeout.
            timeout = FLEX_TIMEOUT if request.tier == "flex" else httpx.USE_CLIENT_DEFAULT
            async with self.client.stream(
                "POST", url, headers=prepared.headers, json=prepared.body, timeout=timeout
            ) as response:
                if response.status_code >= 400:
                    body = await response.aread()
                    raise self.wire.map_error(response.status_code, response.headers, body)
                left = remaining_from_headers(response.headers)
                if left is not None:
                    yield left
                async for chunk in response.aiter_bytes():
                    for sse in decoder.decode(chunk):
                        for event in parser.feed(sse):
                            accumulator.add(event)
                            yield event
                    if not began and accumulator.content_seen:
                        began = True
                        self.wire.reply_began(True)
                tail = [event for sse in decoder.flush() for event in parser.feed(sse)]
                for event in tail + parser.finish():
                    accumulator.add(event)
                    yield event
        except httpx.TransportError as exc:
            if accumulator.content_seen:
                raise StreamBroken(
                    f"{self.name} stream broke after content arrived: {type(exc).__name__}",
                    provider=self.name,
                ) from exc
            raise ProviderConnectionError(
                f"cannot reach {self.name} at {endpoint.base_url}: {type(exc).__name__}",
                provider=self.name,
            ) from exc
        finally:
            if not began:
                self.wire.reply_began(False)
        if not accumulator.completed:
            raise StreamBroken(
                f"{self.name} stream ended before its terminal event", provider=self.name
            )


def join_url(base_url: str, path: str) -> str:
    """`base_url` + `path`, without doubling a version segment the base already ends in
    (`http://host/v1` + `/v1/messages` is `http://host/v1/messages`)."""
    base = base_url.rstrip("/")
    version = "/" + path.lstrip("/").split("/", 1)[0]
    if version != "/" and base.endswith(version):
        base = base[: -len(version)]
    return base + path
