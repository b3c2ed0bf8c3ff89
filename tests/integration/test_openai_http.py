"""The OpenAI wires inside the real HTTP provider, over loopback HTTP, with recorded bodies.

A small server replays corpus streams and records what arrived; retries are real requests.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from grove.providers.base import Message, Request, ThinkingPart
from grove.providers.errors import ProviderHTTPError, ProviderStreamError
from grove.providers.http import Endpoint, HTTPProvider, Wire
from grove.providers.openai.chat import OpenAIChatWire
from grove.providers.openai.responses import OpenAIResponsesWire
from grove.providers.retry import RetryPolicy
from grove.providers.stream_events import Finished, Retrying, StreamEvent
from tests.conformance.corpus import CONFORMANCE_DIR

KEY = "sk-loopback-test-key"
FAST_RETRY = RetryPolicy(max_attempts=3, base_delay_s=0.01, max_delay_s=0.02)


def recorded(name: str) -> bytes:
    return (CONFORMANCE_DIR / name).read_bytes()


@dataclass
class Reply:
    status: int
    body: bytes
    content_type: str = "text/event-stream"


@dataclass
class ReplayServer:
    """Answers request n with replies[n]; keeps each request's path, headers and JSON body."""

    replies: list[Reply]
    requests: list[tuple[str, dict[str, str], Any]] = field(default_factory=list)
    port: int = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        path = head[0].split(" ")[1]
        headers = {
            k.lower(): v.strip() for k, _, v in (line.partition(":") for line in head[1:] if line)
        }
        body = json.loads(await reader.readexactly(int(headers.get("content-length", "0"))))
        self.requests.append((path, headers, body))
        reply = self.replies[len(self.requests) - 1]
        writer.write(
            f"HTTP/1.1 {reply.status} X\r\ncontent-type: {reply.content_type}\r\n"
            f"content-length: {len(reply.body)}\r\nconnection: close\r\n\r\n".encode()
            + reply.body
        )
        await writer.drain()
        writer.close()
        await writer.wait_closed()


@pytest.fixture
async def server() -> AsyncIterator[ReplayServer]:
    replay = ReplayServer(replies=[])
    listener = await asyncio.start_server(replay.handle, "127.0.0.1", 0)
    replay.port = listener.sockets[0].getsockname()[1]
    try:
        yield replay
    finally:
        listener.close()
        await listener.wait_closed()


async def stream(server: ReplayServer, wire: Wire, request: Request) -> list[StreamEvent]:
    endpoint = Endpoint(base_url=f"http://127.0.0.1:{server.port}", api_key=KEY)
    provider = HTTPProvider(wire, lambda: endpoint, retry=FAST_RETRY)
    try:
        return [event async for event in provider.stream(request)]
    finally:
        await provider.aclose()


QUESTION = Request(model="gpt-5-mini", messages=(Message.user("12 + 7, then x3, then x10?"),))


async def test_responses_turn_keeps_reasoning_and_the_call(server: ReplayServer) -> None:
    server.replies = [
        Reply(
            200,
            recorded(
                "openai-responses/vercel-ai_openai-reasoning-encrypted-content.1_response1of4.sse"
            ),
        )
    ]
    events = await stream(server, OpenAIResponsesWire(), QUESTION)
    finished = events[-1]
    assert isinstance(finished, Finished)
    turn = finished.turn
    (call,) = turn.tool_calls
    assert (call.name, call.arguments) == ("calculator", {"a": 12, "b": 7, "op": "add"})
    thinking = turn.message.parts[0]
    assert isinstance(thinking, ThinkingPart) and thinking.provider_data is not None
    assert turn.stop_reason == "completed"
    assert turn.usage.input_tokens == 134
    ((path, headers, body),) = server.requests
    assert path == "/v1/responses"
    assert headers["authorization"] == f"Bearer {KEY}"
    assert body["stream"] is True and body["store"] is False


async def test_quota_error_event_after_200_is_not_retried(server: ReplayServer) -> None:
    server.replies = [Reply(200, recorded("openai-responses/vercel-ai_openai-error.1.sse"))]
    with pytest.raises(ProviderStreamError) as raised:
        await stream(server, OpenAIResponsesWire(), QUESTION)
    assert raised.value.kind == "insufficient_quota"
    assert len(server.requests) == 1


async def test_server_error_event_before_content_is_retried(server: ReplayServer) -> None:
    failed = {
        "type": "error",
        "error": {"type": "server_error", "code": "server_error", "message": "oops"},
    }
    server.replies = [
        Reply(200, f"event: error\ndata: {json.dumps(failed)}\n\n".encode()),
        Reply(200, recorded("openai-responses/vercel-ai_openai-shell-local-multiturn.1.sse")),
    ]
    events = await stream(server, OpenAIResponsesWire(), QUESTION)
    assert [type(event) for event in events if isinstance(event, Retrying | Finished)] == [
        Retrying,
        Finished,
    ]
    assert isinstance(events[-1], Finished)
    assert events[-1].turn.text == "`arm64` (Apple Silicon)."
    assert len(server.requests) == 2


async def test_http_insufficient_quota_is_not_retried(server: ReplayServer) -> None:
    error = {
        "error": {
            "message": "You exceeded your current quota.",
            "type": "insufficient_quota",
            "code": "insufficient_quota",
            "param": None,
        }
    }
    server.replies = [Reply(429, json.dumps(error).encode(), "application/json")]
    with pytest.raises(ProviderHTTPError) as raised:
        await stream(server, OpenAIResponsesWire(), QUESTION)
    assert raised.value.status == 429 and not raised.value.retryable
    assert len(server.requests) == 1


async def test_chat_wire_over_http(server: ReplayServer) -> None:
    server.replies = [Reply(200, recorded("openai-chat/parallel_tool_calls.sse"))]
    events = await stream(server, OpenAIChatWire(), QUESTION)
    finished = events[-1]
    assert isinstance(finished, Finished)
    assert [call.name for call in finished.turn.tool_calls] == ["GetWeatherArgs", "get_stock_price"]
    assert finished.turn.stop_reason == "tool_calls"
    ((path, headers, body),) = server.requests
    assert path == "/v1/chat/completions"
    assert headers["authorization"] == f"Bearer {KEY}"
    assert body["stream_options"] == {"include_usage": True}
