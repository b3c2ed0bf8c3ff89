"""Each vendor's batch wire against the simulator over real HTTP (SPEC 20): items built by the
streaming path's request builders, polled until ended, every result under its own custom id
and read as the same turn the stream gives, at the batch price; errored, expired and
canceled results come back as those kinds."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from grove.providers.anthropic.batch import AnthropicBatchWire
from grove.providers.base import (
    AssistantTurn,
    CachePoint,
    CachePolicy,
    Message,
    Request,
    TextPart,
    ToolCallPart,
    ToolSpec,
)
from grove.providers.batch_wire import BatchItem, BatchResults, BatchWire
from grove.providers.factory import create_provider
from grove.providers.http import Endpoint
from grove.providers.pricing import cost_usd
from grove.simulator import SimulatorConfig, SimulatorThread

KEY = "sk-batch-wires-canary-3d9e71c04b"
MODELS = {"anthropic": "claude-sonnet-4-6"}
LOOKUP = ToolSpec(
    name="lookup",
    description="Look a term up.",
    parameters={"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
)
GUIDE = " ".join(f"Rule {number}: keep the river banks clear of debris." for number in range(400))


def running(**settings: Any) -> Iterator[SimulatorThread]:
    config = SimulatorConfig(api_key=KEY, **{"batch_delay_s": 0.2, **settings})
    with SimulatorThread(config) as simulator:
        yield simulator


@pytest.fixture(scope="module")
def plain() -> Iterator[SimulatorThread]:
    yield from running()


@pytest.fixture(scope="module")
def shares() -> Iterator[SimulatorThread]:
    """A quarter of each batch errored, a quarter expired, from a fixed seed."""
    yield from running(batch_errored=0.25, batch_expired=0.25, seed=7)


@pytest.fixture(scope="module")
def slow() -> Iterator[SimulatorThread]:
    """Batches that take a minute: there is time to cancel them."""
    yield from running(batch_delay_s=60.0)


def endpoint(simulator: SimulatorThread) -> Endpoint:
    return Endpoint(base_url=simulator.base_url, api_key=KEY)


def ask(model: str, text: str, **fields: object) -> Request:
    return Request(model=model, messages=(Message.user(text),), max_tokens=400, **fields)  # type: ignore[arg-type]


def scripted_items(model: str) -> dict[str, Request]:
    """A plain answer, a tool call, thinking with its signature, and a cache mark."""
    cached = Message(
        role="user",
        parts=(
            TextPart(text=GUIDE),
            CachePoint(key="guide"),
            TextPart(text='Which rule is 3? [[sim reply="Rule three."]]'),
        ),
    )
    return {
        "plain": ask(model, 'Say it. [[sim reply="Rivers run to the sea."]]'),
        "tool": ask(
            model, "Look it up. [[sim tool=lookup args='{\"q\": \"delta\"}']]", tools=(LOOKUP,)
        ),
        "thinks": ask(
            model, 'Think first. [[sim thinking="Pondering banks." reply="Banks hold."]]',
            thinking="med",
        ),
        "cached": Request(
            model=model, messages=(cached,), max_tokens=400, cache=CachePolicy()
        ),
    }  # fmt: skip


async def ended(wire: BatchWire, batch_id: str, where: Endpoint) -> None:
    deadline = time.monotonic() + 20.0
    while await wire.status(batch_id, where) != "ended":
        assert time.monotonic() < deadline, "the batch never ended"
        await asyncio.sleep(0.05)


async def run_batch(wire: BatchWire, requests: dict[str, Request], where: Endpoint) -> BatchResults:
    items = [BatchItem(custom_id=custom_id, request=r) for custom_id, r in requests.items()]
    [batch] = wire.split(items)
    batch_id = await wire.submit(batch, where)
    assert await wire.status(batch_id, where) == "in_progress"
    await ended(wire, batch_id, where)
    return await wire.results(batch_id, list(requests), where)


async def streamed(simulator: SimulatorThread, name: str, request: Request) -> AssistantTurn:
    provider = create_provider(name, endpoint=endpoint(simulator))  # type: ignore[arg-type]
    try:
        return await provider.complete(request)
    finally:
        await provider.aclose()


def comparable(turn: AssistantTurn) -> AssistantTurn:
    """`turn` without what differs between two answers to one request: its response id,
    tool call ids (drawn afresh by the simulator) and its price tier's cost."""
    parts = tuple(
        replace(part, call_id=f"call-{index}") if isinstance(part, ToolCallPart) else part
        for index, part in enumerate(turn.message.parts)
    )
    message = replace(turn.message, parts=parts)
    return replace(turn, message=message, response_id=None, cost_usd=0.0)


def wire_for(name: str) -> BatchWire:
    return AnthropicBatchWire()


VENDORS = ["anthropic"]


@pytest.mark.parametrize("name", VENDORS)
async def test_batch_answers_each_request_as_its_stream_does(
    plain: SimulatorThread, name: str
) -> None:
    model = MODELS[name]
    requests = scripted_items(model)
    wire = wire_for(name)
    try:
        results = await run_batch(wire, requests, endpoint(plain))
    finally:
        await wire.aclose()
    assert (results.unknown_ids, results.malformed_lines, results.missing_ids) == (0, 0, ())
    assert sorted(results.outcomes) == sorted(requests)
    turns = {custom_id: outcome.turn for custom_id, outcome in results.outcomes.items()}
    assert all(outcome.kind == "succeeded" for outcome in results.outcomes.values())
    plain_turn, tool_turn, thinking_turn, cached_turn = (
        turns["plain"], turns["tool"], turns["thinks"], turns["cached"]
    )  # fmt: skip
    assert plain_turn is not None and plain_turn.text == "Rivers run to the sea."
    assert tool_turn is not None and [(c.name, c.arguments) for c in tool_turn.tool_calls] == [
        ("lookup", {"q": "delta"})
    ]
    assert thinking_turn is not None and thinking_turn.text == "Banks hold."
    assert thinking_turn.thinking_text == "Pondering banks."
    assert cached_turn is not None and cached_turn.text == "Rule three."
    assert cached_turn.usage.cache_write_tokens > 1024  # the mark went into the batch
    for turn in (plain_turn, tool_turn, thinking_turn, cached_turn):
        assert turn.response_id and turn.stop_reason
        assert turn.cost_usd == cost_usd(turn.model, turn.usage, tier="batch") > 0
        assert turn.cost_usd == pytest.approx(cost_usd(turn.model, turn.usage) / 2, rel=1e-6)
    for custom_id in ("plain", "tool", "thinks"):
        alone = await streamed(plain, name, requests[custom_id])
        batched = turns[custom_id]
        assert batched is not None
        assert comparable(batched) == comparable(alone)
        assert batched.cost_usd == pytest.approx(alone.cost_usd / 2, rel=1e-6)


@pytest.mark.parametrize("name", VENDORS)
async def test_errored_and_expired_shares_come_back_as_those_kinds(
    shares: SimulatorThread, name: str
) -> None:
    model = MODELS[name]
    requests = {f"q{n}": ask(model, f'Item {n}. [[sim reply="Answer {n}."]]') for n in range(8)}
    wire = wire_for(name)
    try:
        results = await run_batch(wire, requests, endpoint(shares))
    finally:
        await wire.aclose()
    kinds = sorted(outcome.kind for outcome in results.outcomes.values())
    assert kinds == ["errored"] * 2 + ["expired"] * 2 + ["succeeded"] * 4
    for custom_id, outcome in results.outcomes.items():
        assert outcome.custom_id == custom_id
        if outcome.kind == "succeeded":
            assert outcome.turn is not None and outcome.turn.text == f"Answer {custom_id[1:]}."
        else:
            assert outcome.turn is None and outcome.error
    assert all(KEY not in (outcome.error or "") for outcome in results.outcomes.values())


@pytest.mark.parametrize("name", VENDORS)
async def test_cancel_ends_the_batch_with_every_request_canceled(
    slow: SimulatorThread, name: str
) -> None:
    model = MODELS[name]
    requests = {f"c{n}": ask(model, f"Item {n}.") for n in range(3)}
    where = endpoint(slow)
    wire = wire_for(name)
    try:
        batch_id = await wire.submit(
            [BatchItem(custom_id=c, request=r) for c, r in requests.items()], where
        )
        assert await wire.status(batch_id, where) == "in_progress"
        await wire.cancel(batch_id, where)
        await ended(wire, batch_id, where)
        results = await wire.results(batch_id, list(requests), where)
    finally:
        await wire.aclose()
    assert {c: o.kind for c, o in results.outcomes.items()} == dict.fromkeys(requests, "canceled")


@pytest.mark.parametrize("name", VENDORS)
async def test_results_for_other_ids_are_counted_never_mapped(
    plain: SimulatorThread, name: str
) -> None:
    """Asked with one id the batch never held and without one it did: the stranger's line
    is not taken, the unasked line is an unknown id, the stranger is missing."""
    model = MODELS[name]
    requests = {"kept": ask(model, "One."), "unasked": ask(model, "Two.")}
    where = endpoint(plain)
    wire = wire_for(name)
    try:
        items = [BatchItem(custom_id=c, request=r) for c, r in requests.items()]
        batch_id = await wire.submit(items, where)
        await ended(wire, batch_id, where)
        results = await wire.results(batch_id, ["kept", "stranger"], where)
    finally:
        await wire.aclose()
    assert sorted(results.outcomes) == ["kept"]
    assert (results.unknown_ids, results.missing_ids) == (1, ("stranger",))
