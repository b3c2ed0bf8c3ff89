"""Each vendor's batch wire against the simulator over real HTTP (SPEC 20): items built by the
streaming path's request builders, polled until ended, every result under its own custom id
and read as the same turn the stream gives, at the batch price; errored, expired and
canceled results come back as those kinds; discard deletes an ended batch (OpenAI: its files)."""

from __future__ import annotations

import asyncio
import socket
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import httpx
import pytest

from grove.providers.anthropic.batch import AnthropicBatchWire
from grove.providers.base import (
    AssistantTurn,
    CachePoint,
    CachePolicy,
    Message,
    Part,
    ProviderName,
    Request,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolSpec,
)
from grove.providers.batch_wire import BatchItem, BatchResults, BatchWire, as_streamed
from grove.providers.errors import ProviderConnectionError, ProviderHTTPError
from grove.providers.factory import OpenAIAPI, create_provider
from grove.providers.google.batch import GeminiBatchWire
from grove.providers.google.stream import TEXT_SIGNATURE_DATA
from grove.providers.http import Endpoint
from grove.providers.openai.batch import OpenAIBatchWire
from grove.providers.pricing import cost_usd
from grove.simulator import SimulatorConfig, SimulatorThread

KEY = "sk-batch-wires-canary-3d9e71c04b"


@dataclass(frozen=True)
class Vendor:
    provider: ProviderName
    model: str
    api: OpenAIAPI = "responses"

    def wire(self) -> BatchWire:
        if self.provider == "anthropic":
            return AnthropicBatchWire()
        if self.provider == "google":
            return GeminiBatchWire()
        return OpenAIBatchWire(self.api)


VENDORS = {
    "anthropic": Vendor(provider="anthropic", model="claude-sonnet-4-6"),
    "openai-responses": Vendor(provider="openai", model="gpt-5-mini"),
    "openai-chat": Vendor(provider="openai", model="gpt-5-mini", api="chat"),
    "google": Vendor(provider="google", model="gemini-3.0-flash"),
}
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
def errors() -> Iterator[SimulatorThread]:
    """Half of each batch errored, nothing expired."""
    yield from running(batch_errored=0.5, seed=5)


@pytest.fixture(scope="module")
def slow() -> Iterator[SimulatorThread]:
    """Batches that take a minute: there is time to cancel them."""
    yield from running(batch_delay_s=60.0)


def endpoint(simulator: SimulatorThread) -> Endpoint:
    return Endpoint(base_url=simulator.base_url, api_key=KEY)


def ask(model: str, text: str, **fields: object) -> Request:
    return Request(model=model, messages=(Message.user(text),), max_tokens=400, **fields)  # type: ignore[arg-type]


def scripted_items(model: str) -> dict[str, Request]:
    """A plain answer, a tool call, thinking with its signature, and two requests that share
    a marked prefix (the first written to the cache, the second read from it)."""

    def cached(question: str, reply: str) -> Request:
        parts = (
            TextPart(text=GUIDE),
            CachePoint(key="guide"),
            TextPart(text=f'{question} [[sim reply="{reply}"]]'),
        )
        message = Message(role="user", parts=parts)
        return Request(model=model, messages=(message,), max_tokens=400, cache=CachePolicy())

    return {
        "plain": ask(model, 'Say it. [[sim reply="Rivers run to the sea."]]'),
        "tool": ask(
            model, "Look it up. [[sim tool=lookup args='{\"q\": \"delta\"}']]", tools=(LOOKUP,)
        ),
        "thinks": ask(
            model, 'Think first. [[sim thinking="Pondering banks." reply="Banks hold."]]',
            thinking="med",
        ),
        "cached": cached("Which rule is 3?", "Rule three."),
        "cached-again": cached("Which rule is 4?", "Rule four."),
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


async def streamed(simulator: SimulatorThread, vendor: Vendor, request: Request) -> AssistantTurn:
    provider = create_provider(vendor.provider, endpoint=endpoint(simulator), openai_api=vendor.api)
    try:
        return await provider.complete(request)
    finally:
        await provider.aclose()


def comparable(turn: AssistantTurn) -> AssistantTurn:
    """`turn` without what differs between two answers to one request: its response id, the
    ids of its tool calls and reasoning items and their encrypted content (drawn afresh for
    each answer), its price tier and cost, and how a signed text is cut (Gemini streams it in
    pieces, the signature with the first; a whole reply holds it in one part): adjacent
    texts are joined, and text signatures kept after the rest."""
    parts: list[Part] = []
    text_signatures: list[Part] = []
    for index, part in enumerate(turn.message.parts):
        if isinstance(part, ToolCallPart):
            part = replace(part, call_id=f"call-{index}")
        elif isinstance(part, ThinkingPart) and part.provider_data == TEXT_SIGNATURE_DATA:
            text_signatures.append(part)
            continue
        elif isinstance(part, ThinkingPart) and part.provider_data:
            drawn: dict[str, str] = {
                k: "drawn" for k in ("id", "encrypted_content") if k in part.provider_data
            }
            part = replace(part, provider_data={**part.provider_data, **drawn})
        before = parts[-1] if parts else None
        if isinstance(part, TextPart) and isinstance(before, TextPart):
            parts[-1] = TextPart(text=before.text + part.text)
        else:
            parts.append(part)
    message = replace(turn.message, parts=(*parts, *text_signatures))
    return replace(turn, message=message, response_id=None, cost_usd=0.0, tier="standard")


@pytest.mark.parametrize("name", sorted(VENDORS))
async def test_batch_answers_each_request_as_its_stream_does(
    plain: SimulatorThread, name: str
) -> None:
    vendor = VENDORS[name]
    model = vendor.model
    requests = scripted_items(model)
    wire = vendor.wire()
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
    again = turns["cached-again"]
    assert cached_turn is not None and cached_turn.text == "Rule three."
    assert again is not None and again.text == "Rule four."
    assert again.usage.cache_read_tokens > 1024  # the mark went into the batch
    for turn in (plain_turn, tool_turn, thinking_turn, cached_turn, again):
        assert turn.response_id and turn.stop_reason
        assert turn.cost_usd == cost_usd(turn.model, turn.usage, tier="batch") > 0
        assert turn.tier == "batch"
        assert turn.cost_usd == pytest.approx(cost_usd(turn.model, turn.usage) / 2, abs=1e-8)
    for custom_id in ("plain", "tool", "thinks"):
        alone = await streamed(plain, vendor, requests[custom_id])
        batched = turns[custom_id]
        assert batched is not None
        assert comparable(batched) == comparable(alone)
        assert batched.cost_usd == pytest.approx(alone.cost_usd / 2, abs=1e-8)


async def eight_answers(simulator: SimulatorThread, vendor: Vendor) -> list[str]:
    """Eight requests batched: the kinds of their outcomes, sorted, each outcome checked to
    be its own request's (a succeeded one's text) or to say why not (the key never in it)."""
    requests = {
        f"q{n}": ask(vendor.model, f'Item {n}. [[sim reply="Answer {n}."]]') for n in range(8)
    }
    wire = vendor.wire()
    try:
        results = await run_batch(wire, requests, endpoint(simulator))
    finally:
        await wire.aclose()
    assert sorted(results.outcomes) == sorted(requests)
    for custom_id, outcome in results.outcomes.items():
        assert outcome.custom_id == custom_id
        if outcome.kind == "succeeded":
            assert outcome.turn is not None and outcome.turn.text == f"Answer {custom_id[1:]}."
        else:
            assert outcome.turn is None and outcome.error and KEY not in outcome.error
    return sorted(outcome.kind for outcome in results.outcomes.values())


@pytest.mark.parametrize("name", sorted(VENDORS))
async def test_errored_and_expired_shares_come_back_as_those_kinds(
    shares: SimulatorThread, name: str
) -> None:
    kinds = await eight_answers(shares, VENDORS[name])
    if VENDORS[name].provider == "google":  # Gemini expires a batch whole, not its requests
        assert kinds == ["expired"] * 8
    else:
        assert kinds == ["errored"] * 2 + ["expired"] * 2 + ["succeeded"] * 4


@pytest.mark.parametrize("name", sorted(VENDORS))
async def test_errored_share_comes_back_errored(errors: SimulatorThread, name: str) -> None:
    assert await eight_answers(errors, VENDORS[name]) == ["errored"] * 4 + ["succeeded"] * 4


@pytest.mark.parametrize("name", sorted(VENDORS))
async def test_cancel_ends_the_batch_with_every_request_canceled(
    slow: SimulatorThread, name: str
) -> None:
    vendor = VENDORS[name]
    model = vendor.model
    requests = {f"c{n}": ask(model, f"Item {n}.") for n in range(3)}
    where = endpoint(slow)
    wire = vendor.wire()
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


@pytest.mark.parametrize("name", sorted(VENDORS))
async def test_results_for_other_ids_are_counted_never_mapped(
    plain: SimulatorThread, name: str
) -> None:
    """Asked with one id the batch never held and without one it did: the stranger's line
    is not taken, the unasked line is an unknown id, the stranger is missing."""
    vendor = VENDORS[name]
    model = vendor.model
    requests = {"kept": ask(model, "One."), "unasked": ask(model, "Two.")}
    where = endpoint(plain)
    wire = vendor.wire()
    try:
        items = [BatchItem(custom_id=c, request=r) for c, r in requests.items()]
        batch_id = await wire.submit(items, where)
        await ended(wire, batch_id, where)
        results = await wire.results(batch_id, ["kept", "stranger"], where)
    finally:
        await wire.aclose()
    assert sorted(results.outcomes) == ["kept"]
    assert (results.unknown_ids, results.missing_ids) == (1, ("stranger",))


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@pytest.mark.parametrize("name", sorted(VENDORS))
async def test_a_refused_key_and_an_absent_server_never_show_the_key(
    plain: SimulatorThread, name: str
) -> None:
    """The vendor's refusal is its mapped error, no answer a connection error; the key is in
    neither (text, repr, kept body, cause), nor in the wire's repr."""
    vendor = VENDORS[name]
    wrong = "sk-batch-wrong-canary-5b1f0e2a7c"
    items = [BatchItem(custom_id="one", request=ask(vendor.model, "One."))]
    wire = vendor.wire()
    try:
        with pytest.raises(ProviderHTTPError) as refused:
            await wire.submit(items, Endpoint(base_url=plain.base_url, api_key=wrong))
        with pytest.raises(ProviderConnectionError) as unreachable:
            batch_id = "batches/b1" if vendor.provider == "google" else "b1"
            nowhere = Endpoint(base_url=f"http://127.0.0.1:{closed_port()}", api_key=wrong)
            await wire.status(batch_id, nowhere)
    finally:
        await wire.aclose()
    assert refused.value.status in (400, 401, 403)
    for raised in (refused.value, unreachable.value):
        shown = "".join(traceback.format_exception(raised)) + repr(raised)
        assert wrong not in shown + getattr(raised, "body", "")
    assert wrong not in repr(wire) and KEY not in repr(wire)


async def test_a_batched_turn_binds_its_thinking_as_a_streamed_one_does(
    plain: SimulatorThread,
) -> None:
    """A model that binds its thinking to the prefix (Claude 5.5): the batched reply, given
    what the streaming path adds from the request, is the streamed reply."""
    request = ask(
        "claude-sonnet-5-5", 'Think. [[sim thinking="Bound." reply="Done."]]', thinking="med"
    )
    wire = AnthropicBatchWire()
    try:
        results = await run_batch(wire, {"bound": request}, endpoint(plain))
    finally:
        await wire.aclose()
    batched = results.outcomes["bound"].turn
    assert batched is not None
    turn = as_streamed("anthropic", request, batched)
    [thinking] = [part for part in turn.message.parts if isinstance(part, ThinkingPart)]
    assert thinking.signature and thinking.prefix and thinking.model == "claude-sonnet-5-5"
    alone = await streamed(plain, VENDORS["anthropic"], request)
    assert comparable(turn) == comparable(alone)


@pytest.mark.parametrize("name", sorted(VENDORS))
async def test_discard_leaves_the_vendor_nothing_of_an_ended_batch(
    plain: SimulatorThread, name: str
) -> None:
    vendor = VENDORS[name]
    requests = {f"d{n}": ask(vendor.model, f"Item {n}.") for n in range(2)}
    where = endpoint(plain)
    wire = vendor.wire()
    try:
        items = [BatchItem(custom_id=c, request=r) for c, r in requests.items()]
        batch_id = await wire.submit(items, where)
        await ended(wire, batch_id, where)
        await wire.discard(batch_id, where)
        with pytest.raises(ProviderHTTPError) as raised:  # the batch, or its output, is gone
            await wire.results(batch_id, list(requests), where)
    finally:
        await wire.aclose()
    assert raised.value.status == 404
    if vendor.provider == "openai":  # the batch stays listed; every file of it is deleted
        headers = {"Authorization": f"Bearer {KEY}"}
        async with httpx.AsyncClient(base_url=plain.base_url, headers=headers) as client:
            batch = (await client.get(f"/v1/batches/{batch_id}")).json()
            files = [batch["input_file_id"], batch["output_file_id"]]
            assert all(files)
            for file_id in files:
                assert (await client.get(f"/v1/files/{file_id}")).status_code == 404
