"""`Coalescer`: calls made while one is in flight travel together, each caller gets its own
answer, and a failed call fails each of its callers (not the next batch)."""

from __future__ import annotations

import asyncio

import pytest

from grove.actors.coalesce import Coalescer


def test_calls_made_while_one_is_in_flight_go_together_in_order() -> None:
    batches: list[list[int]] = []

    async def send(items: list[int]) -> list[int]:
        batches.append(items)
        await asyncio.sleep(0.01)
        return [item * 10 for item in items]

    async def main() -> list[int]:
        coalescer: Coalescer[int, int] = Coalescer(send, "test")
        first = coalescer.call(0)  # queued at once, its call made on the next pass
        await asyncio.sleep(0.001)  # its call is in flight now
        rest = await asyncio.gather(*(coalescer.call(n) for n in range(1, 50)))
        return [await first, *rest]

    assert asyncio.run(main()) == [n * 10 for n in range(50)]
    assert batches == [[0], list(range(1, 50))]  # the 49 together, while the first was away


def test_a_failed_call_fails_its_callers_and_the_next_batch_still_goes() -> None:
    async def send(items: list[str]) -> list[str]:
        await asyncio.sleep(0)
        if "bad" in items:
            raise RuntimeError("the supervisor is away")
        return items

    async def main() -> tuple[str, str]:
        coalescer: Coalescer[str, str] = Coalescer(send, "test")
        with pytest.raises(RuntimeError, match="the supervisor is away"):
            await coalescer.call("bad")
        return await coalescer.call("good"), await coalescer.call("also")

    assert asyncio.run(main()) == ("good", "also")
