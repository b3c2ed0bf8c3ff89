"""The HTTP transport under the MCP SDK's streamable HTTP client: a JSON answer is read with a
size cap (past it the read fails, and the SDK fails that one request at once). Event streams
are capped per event by the SDK itself (`max_sse_event_size`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx2


class _CappedBody(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, limit: int, refused: list[int]) -> None:
        self._inner = inner
        self._limit = limit
        self._refused = refused

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self._inner:
            seen += len(chunk)
            if seen > self._limit:
                self._refused.append(seen)
                raise httpx2.StreamError(f"the answer passed {self._limit:,} bytes, the limit")
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class _CappedTransport(httpx2.AsyncBaseTransport):
    def __init__(self, limit: int, refused: list[int]) -> None:
        self._inner = httpx2.AsyncHTTPTransport()
        self._limit = limit
        self._refused = refused

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            return response
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        return httpx2.Response(
            status_code=response.status_code,
            headers=response.headers,
            stream=_CappedBody(response.stream, self._limit, self._refused),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()


def capped_transport(limit: int, refused: list[int]) -> httpx2.AsyncBaseTransport:
    """A transport whose non-stream answers fail past `limit` bytes; each refusal's size so far
    is appended to `refused`."""
    return _CappedTransport(limit, refused)
