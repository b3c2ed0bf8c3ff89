"""The simulator over plain HTTP: each API's framing, routing and error answers, keep-alive
and chunked request bodies, scripted faults, pacing and write batching, and many streams."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from grove.providers.sse import ServerSentEvent, SSEDecoder
from grove.simulator import Simulator, SimulatorConfig

KEY = "sim-http-test-key-0d9e"
TOKENS = 6


@dataclass(frozen=True)
class Api:
    name: str
    path: str
    headers: dict[str, str]
    content_pattern: str  # matches the data of a token event, and of nothing else
    terminal: str  # what the completion signal's data contains

    def is_content(self, event: ServerSentEvent) -> bool:
        return re.search(self.content_pattern, event.data) is not None

    def body(self, text: str, **extra: Any) -> dict[str, Any]:
        if self.name == "anthropic":
            body = {
                "model": "claude-x",
                "max_tokens": 512,
                "messages": [{"role": "user", "content": text}],
            }
        elif self.name == "responses":
            body = {"model": "gpt-x", "input": text}
        elif self.name == "chat":
            body = {"model": "gpt-x", "messages": [{"role": "user", "content": text}]}
        else:
            body = {"contents": [{"role": "user", "parts": [{"text": text}]}]}
        if self.name != "google":
            body["stream"] = True
        return {**body, **extra}


ANTHROPIC = Api("anthropic", "/v1/messages", {"x-api-key": KEY}, '"text_delta"', "message_stop")
RESPONSES = Api(
    "responses",
    "/v1/responses",
    {"authorization": f"Bearer {KEY}"},
    "response.output_text.delta",
    "response.completed",
)
CHAT = Api(
    "chat",
    "/v1/chat/completions",
    {"authorization": f"Bearer {KEY}"},
    '"content":"[^"]',
    '"finish_reason":"stop"',
)
GOOGLE = Api(
    "google",
    "/v1beta/models/gemini-x:streamGenerateContent?alt=sse",
    {"x-goog-api-key": KEY},
    '"text":"[^"]',
    '"finishReason"',
)
APIS = [ANTHROPIC, RESPONSES, CHAT, GOOGLE]
API_IDS = [api.name for api in APIS]


@pytest.fixture
async def simulator() -> AsyncIterator[Simulator]:
    async with Simulator(SimulatorConfig(api_key=KEY, tokens=TOKENS)) as running:
        yield running


@pytest.fixture
async def client(simulator: Simulator) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=simulator.base_url, timeout=10) as http:
        yield http


async def sse_events(response: httpx.Response) -> list[ServerSentEvent]:
    decoder = SSEDecoder()
    events = [event async for chunk in response.aiter_bytes() for event in decoder.decode(chunk)]
    return events + decoder.flush()


async def stream(
    client: httpx.AsyncClient, api: Api, text: str, **extra: Any
) -> tuple[httpx.Response, list[ServerSentEvent]]:
    async with client.stream(
        "POST", api.path, headers=api.headers, json=api.body(text, **extra)
    ) as response:
        return response, await sse_events(response)


# --- framing ----------------------------------------------------------------------------------


async def test_anthropic_event_sequence(client: httpx.AsyncClient) -> None:
    response, events = await stream(client, ANTHROPIC, "hi")
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["request-id"].startswith("req_")
    names = [event.event for event in events]
    assert names == [
        "message_start", "content_block_start", "ping",
        *["content_block_delta"] * TOKENS,
        "content_block_stop", "message_delta", "message_stop",
    ]  # fmt: skip
    for event in events:
        assert json.loads(event.data)["type"] == event.event
    delta = json.loads(events[-2].data)
    assert delta["delta"]["stop_reason"] == "end_turn"
    assert delta["usage"]["output_tokens"] == TOKENS


async def test_responses_sequence_numbers_and_lifecycle(client: httpx.AsyncClient) -> None:
    _, events = await stream(client, RESPONSES, "hi")
    payloads = [json.loads(event.data) for event in events]
    assert [p["sequence_number"] for p in payloads] == list(range(len(events)))
    assert all(p["type"] == event.event for p, event in zip(payloads, events, strict=True))
    assert payloads[0]["type"] == "response.created"
    assert payloads[1]["type"] == "response.in_progress"
    assert payloads[-1]["type"] == "response.completed"
    ids = {p["response"]["id"] for p in payloads if "response" in p}
    assert len(ids) == 1 and ids.pop().startswith("resp_")
    deltas = [p["delta"] for p in payloads if p["type"] == "response.output_text.delta"]
    assert "".join(deltas) == payloads[-1]["response"]["output"][0]["content"][0]["text"]


async def test_chat_usage_chunk_only_when_asked_and_done_last(client: httpx.AsyncClient) -> None:
    _, plain = await stream(client, CHAT, "hi")
    assert plain[-1].data == "[DONE]"
    assert all("usage" not in json.loads(e.data) for e in plain[:-1])
    _, counted = await stream(client, CHAT, "hi", stream_options={"include_usage": True})
    chunks = [json.loads(e.data) for e in counted[:-1]]
    assert counted[-1].data == "[DONE]"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == TOKENS
    assert all(chunk["usage"] is None for chunk in chunks[:-1])
    assert len({chunk["id"] for chunk in chunks}) == 1


async def test_gemini_crlf_framing_usage_and_finish(client: httpx.AsyncClient) -> None:
    response = await client.post(GOOGLE.path, headers=GOOGLE.headers, json=GOOGLE.body("hi"))
    raw = response.content
    assert raw.endswith(b"\r\n\r\n")
    frames = raw.split(b"\r\n\r\n")[:-1]
    assert len(frames) == TOKENS + 1
    assert all(frame.startswith(b"data: {") for frame in frames)
    chunks = [json.loads(frame[len(b"data: ") :]) for frame in frames]
    assert all("finishReason" not in c["candidates"][0] for c in chunks[:-1])
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP"
    assert chunks[-1]["usageMetadata"]["candidatesTokenCount"] == TOKENS
    assert len({c["responseId"] for c in chunks}) == 1


async def test_gemini_accepts_the_key_in_the_query(client: httpx.AsyncClient) -> None:
    path = f"/v1beta/models/gemini-x:generateContent?key={KEY}"
    response = await client.post(path, json=GOOGLE.body("hi"))
    assert response.status_code == 200
    assert response.json()["candidates"][0]["finishReason"] == "STOP"


# --- routing and refusals ---------------------------------------------------------------------


async def test_unknown_path_wrong_method_and_bad_json(client: httpx.AsyncClient) -> None:
    missing = await client.post("/v1/nothing", json={})
    assert missing.status_code == 404
    assert missing.json()["error"]["message"] == "Invalid URL (POST /v1/nothing)"
    gemini_missing = await client.post("/v1beta/models/x:countTokens", json={})
    assert gemini_missing.status_code == 404
    assert gemini_missing.json()["error"]["status"] == "NOT_FOUND"
    wrong_method = await client.get("/v1/messages", headers=ANTHROPIC.headers)
    assert wrong_method.status_code == 405 and wrong_method.headers["allow"] == "POST"
    for api, kind in [
        (ANTHROPIC, ("error", "type", "invalid_request_error")),
        (RESPONSES, ("error", "type", "invalid_request_error")),
        (GOOGLE, ("error", "status", "INVALID_ARGUMENT")),
    ]:
        bad = await client.post(api.path, headers=api.headers, content=b"{not json")
        assert bad.status_code == 400
        outer, field, value = kind
        body = bad.json()
        assert (body[outer] if api is not ANTHROPIC else body["error"])[field] == value


@pytest.mark.parametrize(
    ("api", "status", "marker"),
    [
        (ANTHROPIC, 401, "x-api-key header is required"),
        (RESPONSES, 401, "You didn't provide an API key"),
        (CHAT, 401, "You didn't provide an API key"),
        (GOOGLE, 403, "PERMISSION_DENIED"),
    ],
    ids=API_IDS,
)
async def test_missing_key_gets_the_apis_own_refusal(
    client: httpx.AsyncClient, api: Api, status: int, marker: str
) -> None:
    response = await client.post(api.path, json=api.body("hi"))
    assert response.status_code == status
    assert marker in response.text


async def test_bad_directive_and_invalid_body_are_400_with_the_reason(
    client: httpx.AsyncClient,
) -> None:
    bad = await client.post(
        ANTHROPIC.path, headers=ANTHROPIC.headers, json=ANTHROPIC.body("[[sim tokens=x]]")
    )
    assert bad.status_code == 400
    assert bad.json()["error"]["message"].startswith("invalid [[sim]] directive: tokens must be")
    no_messages = await client.post(
        ANTHROPIC.path, headers=ANTHROPIC.headers, json={"model": "m", "max_tokens": 5}
    )
    assert no_messages.status_code == 400
    thinking = await client.post(
        ANTHROPIC.path,
        headers=ANTHROPIC.headers,
        json=ANTHROPIC.body("hi", thinking={"type": "enabled", "budget_tokens": 1024}),
    )
    assert thinking.status_code == 400 and "max_tokens" in thinking.json()["error"]["message"]
    no_sse = await client.post(
        "/v1beta/models/g:streamGenerateContent", headers=GOOGLE.headers, json=GOOGLE.body("hi")
    )
    assert no_sse.status_code == 400 and "alt=sse" in no_sse.json()["error"]["message"]


async def test_chunked_request_body_is_read(client: httpx.AsyncClient) -> None:
    payload = json.dumps(CHAT.body("chunked please")).encode()

    async def pieces() -> AsyncIterator[bytes]:
        for start in range(0, len(payload), 7):
            yield payload[start : start + 7]

    async with client.stream("POST", CHAT.path, headers=CHAT.headers, content=pieces()) as resp:
        assert resp.request.headers["transfer-encoding"] == "chunked"
        events = await sse_events(resp)
    assert resp.status_code == 200 and events[-1].data == "[DONE]"


# --- raw connections: keep-alive and write batching -------------------------------------------


@dataclass
class RawResponse:
    status: int
    headers: dict[str, str]
    chunks: list[bytes]
    complete: bool


def raw_request(api: Api, text: str, *, close: bool = False) -> bytes:
    body = json.dumps(api.body(text)).encode()
    headers = {
        **api.headers,
        "host": "sim",
        "content-type": "application/json",
        "content-length": str(len(body)),
    }
    if close:
        headers["connection"] = "close"
    head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    return f"POST {api.path} HTTP/1.1\r\n{head}\r\n".encode() + body


async def read_response(reader: asyncio.StreamReader) -> RawResponse:
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
    status = int(head[0].split(" ")[1])
    headers = {
        name.lower(): value.strip()
        for name, _, value in (line.partition(":") for line in head[1:] if line)
    }
    if "content-length" in headers:
        body = await reader.readexactly(int(headers["content-length"]))
        return RawResponse(status, headers, [body], True)
    chunks: list[bytes] = []
    while True:
        try:
            size = int((await reader.readuntil(b"\r\n")).strip(), 16)
        except asyncio.IncompleteReadError:
            return RawResponse(status, headers, chunks, False)
        if size == 0:
            await reader.readexactly(2)
            return RawResponse(status, headers, chunks, True)
        chunks.append(await reader.readexactly(size))
        await reader.readexactly(2)


async def test_keep_alive_serves_requests_in_turn_on_one_connection(
    simulator: Simulator,
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", simulator.port)
    try:
        for api in APIS:
            writer.write(raw_request(api, f"turn for {api.name}"))
            response = await read_response(reader)
            assert response.status == 200 and response.complete
            assert response.headers["connection"] == "keep-alive"
        writer.write(raw_request(CHAT, "last", close=True))
        last = await read_response(reader)
        assert last.complete and last.headers["connection"] == "close"
        assert await reader.read() == b""
    finally:
        writer.close()


async def test_events_per_write_puts_that_many_events_in_each_chunk() -> None:
    config = SimulatorConfig(api_key=KEY, tokens=10, events_per_write=4)
    async with Simulator(config) as simulator:
        reader, writer = await asyncio.open_connection("127.0.0.1", simulator.port)
        writer.write(raw_request(ANTHROPIC, "batch these", close=True))
        response = await read_response(reader)
        writer.close()
    counts = [chunk.count(b"\n\n") for chunk in response.chunks]
    total = 1 + 1 + 1 + 10 + 1 + 1 + 1  # start, block start, ping, deltas, stop, delta, stop
    assert sum(counts) == total
    assert counts[:-1] == [4] * (len(counts) - 1)
    assert 1 <= counts[-1] <= 4


async def test_one_event_per_write_by_default(simulator: Simulator) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", simulator.port)
    writer.write(raw_request(RESPONSES, "one by one", close=True))
    response = await read_response(reader)
    writer.close()
    assert all(chunk.count(b"\n\n") == 1 for chunk in response.chunks)


# --- faults -----------------------------------------------------------------------------------


@pytest.mark.parametrize("after", [0, 3])
@pytest.mark.parametrize("api", APIS, ids=API_IDS)
async def test_disconnect_after_n_content_events_without_terminal_signal(
    simulator: Simulator, api: Api, after: int
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", simulator.port)
    writer.write(raw_request(api, f"[[sim fault=disconnect after={after}]] cut me"))
    response = await read_response(reader)
    writer.close()
    assert response.status == 200 and not response.complete
    body = b"".join(response.chunks).decode()
    events = SSEDecoder().decode(body.encode())
    assert sum(api.is_content(event) for event in events) == after
    assert all(api.terminal not in event.data for event in events)


@pytest.mark.parametrize("api", APIS, ids=API_IDS)
async def test_times_fails_only_the_first_n_requests(client: httpx.AsyncClient, api: Api) -> None:
    text = f"[[sim fault=503 times=2]] {api.name}"
    statuses = []
    for _ in range(4):
        response = await client.post(api.path, headers=api.headers, json=api.body(text))
        statuses.append(response.status_code)
    assert statuses == [503, 503, 200, 200]


@pytest.mark.parametrize("api", APIS, ids=API_IDS)
async def test_429_carries_retry_after_headers(client: httpx.AsyncClient, api: Api) -> None:
    response = await client.post(
        api.path, headers=api.headers, json=api.body("[[sim fault=429 retry_after=0.25]]")
    )
    assert response.status_code == 429
    assert response.headers["retry-after"] == "0.25"
    assert response.headers["retry-after-ms"] == "250"


async def test_anthropic_529_is_overloaded_error(client: httpx.AsyncClient) -> None:
    response = await client.post(
        ANTHROPIC.path, headers=ANTHROPIC.headers, json=ANTHROPIC.body("[[sim fault=529]]")
    )
    assert response.status_code == 529
    assert response.json()["error"] == {"type": "overloaded_error", "message": "Overloaded"}


@pytest.mark.parametrize(
    ("api", "marker"),
    [
        (ANTHROPIC, "overloaded_error"),
        (RESPONSES, "server_error"),
        (CHAT, "server_error"),
        (GOOGLE, "UNAVAILABLE"),
    ],
    ids=API_IDS,
)
async def test_error_after_200_comes_before_any_content(
    client: httpx.AsyncClient, api: Api, marker: str
) -> None:
    response, events = await stream(client, api, "[[sim fault=error_after_200]]")
    assert response.status_code == 200
    assert any(marker in event.data for event in events)
    assert not any(api.is_content(event) for event in events)
    assert not any(api.terminal in event.data for event in events)


async def test_non_streamed_disconnect_closes_without_an_answer(
    client: httpx.AsyncClient,
) -> None:
    body = ANTHROPIC.body("[[sim fault=disconnect]]", stream=False)
    with pytest.raises(httpx.RemoteProtocolError):
        await client.post(ANTHROPIC.path, headers=ANTHROPIC.headers, json=body)


async def test_reviewer_directive_applies_only_to_requests_offering_advise(
    client: httpx.AsyncClient,
) -> None:
    text = "[[sim reply=worker]] [[sim@reviewer reply=reviewer]]"
    tools = [{"name": "advise", "input_schema": {"type": "object"}}]
    plain = await client.post(
        ANTHROPIC.path, headers=ANTHROPIC.headers, json=ANTHROPIC.body(text, stream=False)
    )
    reviewer = await client.post(
        ANTHROPIC.path,
        headers=ANTHROPIC.headers,
        json=ANTHROPIC.body(text, stream=False, tools=tools),
    )
    assert plain.json()["content"][0]["text"] == "worker"
    assert reviewer.json()["content"][0]["text"] == "reviewer"


# --- pacing and load --------------------------------------------------------------------------


@pytest.mark.parametrize("api", APIS, ids=API_IDS)
async def test_ttft_and_tps_are_lower_bounds(client: httpx.AsyncClient, api: Api) -> None:
    started = time.monotonic()
    arrivals: list[float] = []
    decoder = SSEDecoder()
    async with client.stream(
        "POST",
        api.path,
        headers=api.headers,
        json=api.body("[[sim ttft_ms=300 tps=20 tokens=5]] pace"),
    ) as response:
        async for chunk in response.aiter_bytes():
            for event in decoder.decode(chunk):
                if api.is_content(event):
                    arrivals.append(time.monotonic() - started)
    assert len(arrivals) == 5
    assert arrivals[0] >= 0.3
    assert arrivals[-1] >= 0.3 + 4 / 20


@pytest.mark.parametrize("fault", ["", "fault=429"])
async def test_slow_headers_delay_the_response_head(client: httpx.AsyncClient, fault: str) -> None:
    started = time.monotonic()
    async with client.stream(
        "POST", CHAT.path, headers=CHAT.headers, json=CHAT.body(f"[[sim headers_ms=300 {fault}]]")
    ) as response:
        waited = time.monotonic() - started
        await response.aread()
    assert waited >= 0.3
    assert response.status_code == (429 if fault else 200)


async def test_a_thousand_concurrent_streams_all_complete() -> None:
    config = SimulatorConfig(api_key=KEY, tokens=20, ttft_ms=50, tps=100)
    async with Simulator(config) as simulator:

        async def one(index: int) -> int:
            reader, writer = await asyncio.open_connection("127.0.0.1", simulator.port)
            writer.write(raw_request(ANTHROPIC, f"stream {index}", close=True))
            response = await read_response(reader)
            writer.close()
            assert response.complete
            return b"".join(response.chunks).count(b'"text_delta"')

        started = time.monotonic()
        counts = await asyncio.wait_for(asyncio.gather(*(one(i) for i in range(1000))), 60)
        elapsed = time.monotonic() - started
    assert counts == [20] * 1000
    assert elapsed >= 0.05 + 19 / 100  # each stream is paced, even under load
