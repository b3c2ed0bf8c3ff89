"""The flex tier on the wire, over real HTTP to the simulator: OpenAI's (both wires) and
Gemini's flex field sent, the reply priced at half; a flex request refused for want of capacity
retried with backoff, then sent on the standard tier when `flex_fallback` says so, else failed
with a text that says what would help; `[tiers] flex_fallback` doing so for a Grove's agents.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from grove.providers.base import Message, Request, Tier
from grove.providers.errors import ProviderError
from grove.providers.factory import OpenAIAPI, create_provider
from grove.providers.http import Endpoint, HTTPProvider
from grove.providers.pricing import cost_usd
from grove.providers.retry import RetryPolicy
from grove.providers.stream_events import Finished, ProviderWarning, Retrying, StreamEvent
from grove.simulator import SimulatorConfig, SimulatorThread
from grove.supervisor.store import open_store
from tests.integration.groves import FAST_RETRIES, running_grove

KEY = "sim-flex-key-5521"
WIRES: list[tuple[str, str, OpenAIAPI]] = [
    ("openai", "gpt-5-mini", "responses"),
    ("openai", "gpt-5-mini", "chat"),
    ("google", "gemini-3.0-flash", "responses"),
]
WIRE_IDS = ["openai-responses", "openai-chat", "google"]
TRIES = 3


@pytest.fixture(scope="module")
def every_other() -> Iterator[SimulatorThread]:
    """Every second flex request refused for want of capacity."""
    with SimulatorThread(SimulatorConfig(api_key=KEY, tokens=8, flex_unavailable=0.5)) as sim:
        yield sim


@pytest.fixture(scope="module")
def none_left() -> Iterator[SimulatorThread]:
    """Every flex request refused for want of capacity."""
    with SimulatorThread(SimulatorConfig(api_key=KEY, tokens=8, flex_unavailable=1.0)) as sim:
        yield sim


def provider(
    simulator: SimulatorThread, wire: tuple[str, str, OpenAIAPI], fallback: bool = False
) -> HTTPProvider:
    retry = RetryPolicy(
        max_attempts=TRIES, base_delay_s=0.01, max_delay_s=0.02, flex_fallback=fallback
    )
    return create_provider(
        wire[0],  # type: ignore[arg-type]
        endpoint=Endpoint(base_url=simulator.base_url, api_key=KEY),
        openai_api=wire[2],
        retry=retry,
    )


async def sent(p: HTTPProvider, model: str, tier: Tier = "flex") -> list[StreamEvent]:
    request = Request(model=model, messages=(Message.user("Name a sea"),), tier=tier)
    try:
        return [event async for event in p.stream(request)]
    finally:
        await p.aclose()


def flex_field(body: dict[str, object]) -> object:
    return body.get("serviceTier", body.get("service_tier"))


@pytest.mark.parametrize("wire", WIRES, ids=WIRE_IDS)
async def test_a_refused_flex_request_is_retried_and_priced_at_half(
    every_other: SimulatorThread, wire: tuple[str, str, OpenAIAPI]
) -> None:
    refused = every_other.simulator.stats()["flex_refused"]
    events: list[StreamEvent] = []
    for _ in range(2):  # of any two flex requests in a row, one is refused
        events += await sent(provider(every_other, wire), wire[1])
    retried = sum(isinstance(event, Retrying) for event in events)
    assert retried >= 1 and every_other.simulator.stats()["flex_refused"] == refused + retried
    turns = [event.turn for event in events if isinstance(event, Finished)]
    assert len(turns) == 2 and {turn.tier for turn in turns} == {"flex"}
    for turn in turns:
        assert turn.cost_usd > 0
        assert turn.cost_usd == pytest.approx(cost_usd(turn.model, turn.usage) / 2)
    assert flex_field(every_other.simulator.received[-1]) == "flex"


async def test_a_standard_request_sends_no_tier(every_other: SimulatorThread) -> None:
    events = await sent(provider(every_other, WIRES[0]), WIRES[0][1], "standard")
    assert isinstance(events[-1], Finished) and events[-1].turn.tier == "standard"
    assert "service_tier" not in every_other.simulator.received[-1]


@pytest.mark.parametrize("wire", WIRES, ids=WIRE_IDS)
async def test_without_capacity_it_fails_saying_what_would_help(
    none_left: SimulatorThread, wire: tuple[str, str, OpenAIAPI]
) -> None:
    refused = none_left.simulator.stats()["flex_refused"]
    with pytest.raises(ProviderError) as caught:
        await sent(provider(none_left, wire), wire[1])
    text = str(caught.value)
    assert f"no flex capacity in {TRIES} tries" in text
    assert "[tiers] flex_fallback = true" in text
    assert none_left.simulator.stats()["flex_refused"] == refused + TRIES


@pytest.mark.parametrize("wire", WIRES, ids=WIRE_IDS)
async def test_with_fallback_it_goes_on_standard_at_the_standard_price(
    none_left: SimulatorThread, wire: tuple[str, str, OpenAIAPI]
) -> None:
    refused = none_left.simulator.stats()["flex_refused"]
    events = await sent(provider(none_left, wire, fallback=True), wire[1])
    assert none_left.simulator.stats()["flex_refused"] == refused + TRIES
    warnings = [event.text for event in events if isinstance(event, ProviderWarning)]
    assert warnings == [f"no flex capacity after {TRIES} tries: sent on the standard tier instead"]
    finished = events[-1]
    assert isinstance(finished, Finished) and finished.turn.tier == "standard"
    assert finished.turn.cost_usd == pytest.approx(
        cost_usd(finished.turn.model, finished.turn.usage)
    )
    assert flex_field(none_left.simulator.received[-1]) is None


def test_a_groves_flex_agent_goes_on_standard_when_the_config_says_so(
    none_left: SimulatorThread, tmp_path: Path
) -> None:
    env = {**FAST_RETRIES, "GROVE_TIERS__FLEX_FALLBACK": "true"}
    endpoint = Endpoint(base_url=none_left.base_url, api_key=KEY)
    with running_grove(tmp_path, hosts=1, env=env, endpoint=endpoint) as grove:
        root = grove.create_root("gpt-5-mini", tier="flex").uuid
        turn = grove.send(root, "Name a sea")
        notices = [text for kind, text in turn if kind == "notice"]
        result = turn.result()
        assert result.ok, result.error
        store = open_store(grove.settings.store)
        try:
            (reply,) = [m for m in store.agent_messages(root) if m.kind == "assistant"]
        finally:
            store.close()
    assert "no flex capacity after 6 tries: sent on the standard tier instead" in notices
    assert reply.data["tier"] == "standard" and reply.data["cost_usd"] == result.cost_usd > 0
    assert flex_field(none_left.simulator.received[-1]) is None
