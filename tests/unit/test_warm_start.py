"""The warm-up before fan-out (`ForkCaches.warm_start`): the first child of a cold prefix goes
alone; the others go when its reply begins, when it fails (at once), or after a bounded
wait; a warm prefix lets them all go at once; without caching nobody waits.

The gate's logic alone, on an event loop, with a plain object for the supervisor's core.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import Any

from actors.agent import ModelChoice
from providers.base import CachePolicy
from supervisor.fork_cache import WARM_WAIT_S, ForkCaches, SharedPrefix

# "At once": far below the gate's own bound on the wait, far above a busy machine's delays.
AT_ONCE_S = WARM_WAIT_S / 30

PREFIX = SharedPrefix(
    key=("root", 2),
    parent="root",
    choice=ModelChoice(provider="anthropic", model="m"),
    tokens=5_000,
)


@dataclass
class Core:
    """What the gate reads of the supervisor's core: its `[cache]`."""

    cache: CachePolicy | None = field(default_factory=CachePolicy)
    store: Any = None

    def live(self, uuid: str, record: Any = None) -> Any:
        raise AssertionError("not used by warm_start")

    def event(self, kind: str, **payload: Any) -> None:
        raise AssertionError("not used by warm_start")


async def fan_out(
    gate: ForkCaches, count: int, first_reply: asyncio.Event, fail_first: bool = False
) -> list[tuple[int, float]]:
    """`count` children through the gate at once: (child, when it started), in start order."""
    loop = asyncio.get_running_loop()
    began = loop.time()
    starts: list[tuple[int, float]] = []

    async def child(number: int) -> None:
        async def start() -> int:
            starts.append((number, loop.time() - began))
            if number == 0 and fail_first:
                await asyncio.sleep(0.05)  # the others are waiting by now
                raise RuntimeError("first request failed")
            return number

        async def started(_: int) -> None:
            await first_reply.wait()

        with contextlib.suppress(RuntimeError):
            await gate.warm_start(PREFIX, start, started)

    await asyncio.gather(*(child(number) for number in range(count)))
    return starts


def test_the_others_wait_for_the_first_reply_to_begin() -> None:
    async def scenario() -> list[tuple[int, float]]:
        gate, reply = ForkCaches(Core()), asyncio.Event()
        asyncio.get_running_loop().call_later(0.2, reply.set)
        return await fan_out(gate, 5, reply)

    starts = asyncio.run(scenario())
    assert starts[0][0] == 0 and starts[0][1] < AT_ONCE_S
    assert all(0.2 <= at < 0.2 + AT_ONCE_S for _, at in starts[1:])


def test_a_failed_first_request_releases_the_others_at_once() -> None:
    async def scenario() -> list[tuple[int, float]]:
        return await fan_out(ForkCaches(Core()), 5, asyncio.Event(), fail_first=True)

    assert all(at < AT_ONCE_S for _, at in asyncio.run(scenario()))


def test_the_wait_is_bounded() -> None:
    async def scenario() -> list[tuple[int, float]]:
        return await fan_out(ForkCaches(Core(), wait_s=0.3), 4, asyncio.Event())

    later = [at for _, at in asyncio.run(scenario())[1:]]
    assert all(0.3 <= at < 0.5 for at in later)


def test_a_warm_prefix_and_caching_off_let_everyone_go_at_once() -> None:
    async def scenario(core: Core, warm_first: bool) -> list[tuple[int, float]]:
        gate, reply = ForkCaches(core), asyncio.Event()
        if warm_first:
            reply.set()
            await fan_out(gate, 1, reply)  # warms the prefix
            reply = asyncio.Event()  # a later fan-out would wait on this, if it waited
        return await fan_out(gate, 5, reply)

    for core, warm_first in ((Core(), True), (Core(cache=None), False)):
        assert all(at < AT_ONCE_S for _, at in asyncio.run(scenario(core, warm_first)))
