"""Grove's own providers against the simulator over real HTTP: retries, breaks, auth.

Every provider and wire goes through the same faults; the simulator is the only server.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import pytest

from grove.providers.base import Message, Request, ToolSpec
from grove.providers.errors import ProviderError, ProviderHTTPError, StreamBroken
from grove.providers.factory import OpenAIAPI, create_provider
from grove.providers.http import Endpoint, HTTPProvider
from grove.providers.retry import RetryPolicy
from grove.providers.stream_events import Finished, Retrying, StreamEvent
from grove.simulator import SimulatorConfig, SimulatorThread

KEY = "sk-canary-7f3a9c2e1b5d4a6f8e0c"
WireChoice = tuple[str, str, OpenAIAPI]
WIRES: list[WireChoice] = [
    ("anthropic", "claude-sonnet-4-6", "responses"),
    ("openai", "gpt-5-mini", "responses"),
    ("openai", "gpt-5-mini", "chat"),
    ("google", "gemini-3.0-flash", "responses"),
]
WIRE_IDS = ["anthropic", "openai-responses", "openai-chat", "google"]
# `times=N` counts requests per exact directive text: each wire gets its own text.
TOKENS = {wire_id: 10 + index for index, wire_id in enumerate(WIRE_IDS)}


def unique(wire: WireChoice) -> str:
    return f"tokens={TOKENS[WIRE_IDS[WIRES.index(wire)]]}"


FAST_RETRY = RetryPolicy(max_attempts=4, base_delay_s=0.05, max_delay_s=0.2)


@pytest.fixture(scope="module")
def simulator() -> Iterator[SimulatorThread]:
    with SimulatorThread(SimulatorConfig(api_key=KEY)) as running:
        yield running


def provider(simulator: SimulatorThread, wire: WireChoice, key: str = KEY) -> HTTPProvider:
    name, _, api = wire
    return create_provider(
        name,  # type: ignore[arg-type]
        endpoint=Endpoint(base_url=simulator.base_url, api_key=key),
        openai_api=api,
        retry=FAST_RETRY,
    )


LOOKUP = ToolSpec(
    name="lookup",
    description="Look a term up.",
    parameters={"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
)


async def collect(
    p: HTTPProvider, text: str, model: str, tools: tuple[ToolSpec, ...] = ()
) -> list[StreamEvent]:
    request = Request(model=model, messages=(Message.user(text),), tools=tools)
    try:
        return [event async for event in p.stream(request)]
    finally:
        await p.aclose()


@pytest.mark.parametrize("wire", WIRES, ids=WIRE_IDS)
async def test_429_with_retry_after_waits_then_succeeds(
    simulator: SimulatorThread, wire: WireChoice
) -> None:
    started = time.monotonic()
    events = await collect(
        provider(simulator, wire),
        f"[[sim fault=429 retry_after=1 times=1 {unique(wire)}]] hello",
        wire[1],
    )
    elapsed = time.monotonic() - started
    retries = [e for e in events if isinstance(e, Retrying)]
    assert len(retries) == 1
    # each attempt is announced just before it is sent, the retry before its wait too
    assert [e.kind for e in events if e.kind in ("retrying", "sending")] == [
        "sending",
        "retrying",
        "sending",
    ]
    assert retries[0].delay_s >= 1.0
    assert elapsed >= 1.0
    assert isinstance(events[-1], Finished) and events[-1].turn.text


@pytest.mark.parametrize("wire", WIRES, ids=WIRE_IDS)
async def test_error_after_200_twice_then_success_on_third(
    simulator: SimulatorThread, wire: WireChoice
) -> None:
    events = await collect(
        provider(simulator, wire),
        f"[[sim fault=error_after_200 times=2 {unique(wire)}]] third",
        wire[1],
    )
    assert sum(isinstance(e, Retrying) for e in events) == 2
    assert isinstance(events[-1], Finished) and events[-1].turn.text


@pytest.mark.parametrize("wire", WIRES, ids=WIRE_IDS)
async def test_disconnect_after_content_fails_without_complete_answer(
    simulator: SimulatorThread, wire: WireChoice
) -> None:
    p = provider(simulator, wire)
    seen: list[StreamEvent] = []
    request = Request(
        model=wire[1], messages=(Message.user("[[sim fault=disconnect after=3]] bye"),)
    )
    with pytest.raises(StreamBroken):
        async for event in p.stream(request):
            seen.append(event)
    await p.aclose()
    assert not any(isinstance(e, Finished) for e in seen)
    assert not any(isinstance(e, Retrying) for e in seen)
    assert sum(e.kind == "text_delta" for e in seen) >= 1


@pytest.mark.parametrize("wire", WIRES, ids=WIRE_IDS)
async def test_wrong_key_is_not_retried(
    simulator: SimulatorThread, wire: WireChoice, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    wrong = "sk-wrong-canary-55aa"
    p = provider(simulator, wire, key=wrong)
    events: list[StreamEvent] = []
    with pytest.raises(ProviderHTTPError) as info:
        async for event in p.stream(Request(model=wire[1], messages=(Message.user("hi"),))):
            events.append(event)
    await p.aclose()
    assert info.value.status in (400, 401)
    assert not info.value.retryable
    assert not any(isinstance(e, Retrying) for e in events)
    assert wrong not in str(info.value) and wrong not in repr(info.value.body)
    assert wrong not in caplog.text


@pytest.mark.parametrize("wire", WIRES, ids=WIRE_IDS)
async def test_thinking_and_tool_call_round_trip(
    simulator: SimulatorThread, wire: WireChoice
) -> None:
    events = await collect(
        provider(simulator, wire),
        '[[sim tool=lookup args=\'{"q": "grove"}\']] find it',
        wire[1],
        tools=(LOOKUP,),
    )
    turn = events[-1].turn  # type: ignore[union-attr]
    assert [(c.name, c.arguments) for c in turn.tool_calls] == [("lookup", {"q": "grove"})]


async def test_canary_key_never_leaks(
    simulator: SimulatorThread,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Every fault path, every wire: the key is in no event, exception, log or output."""
    caplog.set_level(logging.DEBUG)
    texts: list[str] = []
    for wire in WIRES:
        for directive in (
            "fault=429 retry_after=0",
            "fault=529",
            "fault=disconnect after=1",
            "fault=error_after_200",
            'thinking="hm"',
        ):
            p = provider(simulator, wire)
            request = Request(
                model=wire[1], messages=(Message.user(f"[[sim {directive}]] x"),), thinking="low"
            )
            try:
                async for event in p.stream(request):
                    texts.append(repr(event))
            except ProviderError as exc:
                texts.extend([str(exc), repr(exc), repr(getattr(exc, "body", ""))])
            finally:
                await p.aclose()
    captured = capsys.readouterr()
    everything = "\n".join([*texts, caplog.text, captured.out, captured.err])
    assert texts
    assert KEY not in everything
