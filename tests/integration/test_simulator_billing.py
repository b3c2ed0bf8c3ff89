"""What the simulator bills when its client goes away, over plain HTTP: a request read in full
is billed its prompt in every phase (before the response head, while waiting for the first
token, mid-stream, before a planned break), its reply as far as written; faults and error
answers are not billed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from grove.simulator import Simulator, SimulatorConfig
from tests.integration.test_simulator_http import ANTHROPIC, KEY, raw_request, read_response

TOKENS = 20
SLOW = "headers_ms=400 ttft_ms=400"  # the head after 0.4 s, the first token 0.4 s later


@pytest.fixture
async def simulator() -> AsyncIterator[Simulator]:
    async with Simulator(SimulatorConfig(api_key=KEY, tokens=TOKENS)) as running:
        yield running


async def billed(simulator: Simulator) -> dict[str, Any]:
    """The bill, read from the simulator's endpoint as a benchmark reads it."""
    async with httpx.AsyncClient(base_url=simulator.base_url) as client:
        bill: dict[str, Any] = (await client.get("/_simulator/stats")).json()["billed"]
    return bill


async def billed_once(simulator: Simulator) -> dict[str, Any]:
    """The bill once its one request is in it (the simulator notices a client gone at its
    next write), or as it is after 5 s."""
    for _ in range(50):
        bill = await billed(simulator)
        if bill["requests"]:
            return bill
        await asyncio.sleep(0.1)
    return bill


async def leave(simulator: Simulator, directive: str, phase: str) -> int:
    """Send a request and close the socket in `phase`: the content frames read by then."""
    reader, writer = await asyncio.open_connection("127.0.0.1", simulator.port)
    writer.write(raw_request(ANTHROPIC, f"[[sim {directive}]] leave me"))
    await writer.drain()
    read = 0
    if phase == "before_head":
        await asyncio.sleep(0.2)
    else:
        await reader.readuntil(b"\r\n\r\n")
        if phase == "mid_stream":
            while read < 2:
                read += (await reader.readuntil(b"\n\n")).count(b"text_delta")
    writer.transport.abort()  # as a killed process's socket goes
    return read


@pytest.mark.parametrize("phase", ["before_head", "ttft", "mid_stream"])
@pytest.mark.parametrize("fault", ["", "fault=disconnect after=15"])
async def test_a_request_read_in_full_is_billed_whenever_its_client_leaves(
    simulator: Simulator, phase: str, fault: str
) -> None:
    read = await leave(simulator, f"{SLOW} tps=20 {fault}", phase)
    bill = await billed_once(simulator)
    assert bill["requests"] == 1
    assert bill["input_tokens"] > 0
    assert read <= bill["output_tokens"] < TOKENS  # as far as written: not the whole reply


async def test_a_planned_break_and_an_error_answer_are_not_billed(simulator: Simulator) -> None:
    for directive in ("fault=disconnect after=2", "fault=529", "fault=error_after_200"):
        reader, writer = await asyncio.open_connection("127.0.0.1", simulator.port)
        writer.write(raw_request(ANTHROPIC, f"[[sim {directive}]] fail me", close=True))
        response = await read_response(reader)
        writer.close()
        assert response.status in (200, 529)
    await asyncio.sleep(0.3)
    assert (await billed(simulator))["requests"] == 0
