"""The warm-up before fan-out (`ForkCaches.warm_start`): the first child of a cold prefix goes
alone; the others go when its reply begins, when it fails (at once), or after a bounded
wait; a warm prefix lets them all go at once; without caching, or on the batch tier, nobody
waits.

The gate's logic alone, on an event loop, with a plain object for the supervisor's core. What
lets the others go is read from the order things happened in, not from how long they took: the
gate's own wait is an hour wherever something else is to release them.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import Any

from grove.actors.agent.choice import ModelChoice
from grove.providers.base import CachePolicy
from grove.supervisor.fork_cache import ForkCaches, SharedPrefix

NEVER_S = 3600.0  # a wait of the gate no test sees end
STUCK_S = 60.0  # a fan-out not done by then is stuck in the gate

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
    gate: ForkCaches,
    count: int,
    reply_after_s: float | None = None,
    fail_first: bool = False,
    prefix: SharedPrefix = PREFIX,
) -> list[tuple[str, float]]:
    """`count` children through the gate at once, the first child's reply beginning
    `reply_after_s` after the start (never without): what happened ("start N", "reply",
    "failed 0") and when, in order."""
    loop = asyncio.get_running_loop()
    began = loop.time()
    happened: list[tuple[str, float]] = []
    first_reply = asyncio.Event()

    def reply() -> None:
        happened.append(("reply", loop.time() - began))
        first_reply.set()

    if reply_after_s is not None:
        loop.call_later(reply_after_s, reply)

    async def child(number: int) -> None:
        async def start() -> int:
            happened.append((f"start {number}", loop.time() - began))
            if number == 0 and fail_first:
                await asyncio.sleep(0.05)  # the others are waiting by now
                happened.append(("failed 0", loop.time() - began))
                raise RuntimeError("first request failed")
            return number

        async def started(_: int) -> None:
            await first_reply.wait()

        with contextlib.suppress(RuntimeError):
            await gate.warm_start(prefix, start, started)

    await asyncio.wait_for(asyncio.gather(*(child(n) for n in range(count))), STUCK_S)
    return happened


def names(happened: list[tuple[str, float]]) -> list[str]:
    return [what for what, _ in happened]


def starts(first: int, end: int) -> list[str]:
    return [f"start {number}" for number in range(first, end)]


def test_the_others_wait_for_the_first_reply_to_begin() -> None:
    happened = asyncio.run(fan_out(ForkCaches(Core(), wait_s=NEVER_S), 5, reply_after_s=0.2))
    order = names(happened)
    assert order[:2] == ["start 0", "reply"]
    assert sorted(order[2:]) == starts(1, 5)


def test_a_failed_first_request_releases_the_others_at_once() -> None:
    gate = ForkCaches(Core(), wait_s=NEVER_S)
    order = names(asyncio.run(fan_out(gate, 5, fail_first=True)))  # no reply ever begins
    assert order[:2] == ["start 0", "failed 0"]
    assert sorted(order[2:]) == starts(1, 5)


def test_the_wait_is_bounded() -> None:
    """No reply ever begins: the others go when the gate's wait ends, not before."""
    happened = asyncio.run(fan_out(ForkCaches(Core(), wait_s=0.3), 4))
    order = names(happened)
    assert order[0] == "start 0" and sorted(order[1:]) == starts(1, 4)
    assert all(at >= 0.3 for _, at in happened[1:])


def test_a_warm_prefix_and_caching_off_let_everyone_go_at_once() -> None:
    """Nobody waits for a reply that never begins: all five start."""

    async def scenario(core: Core, warm_first: bool) -> list[tuple[str, float]]:
        gate = ForkCaches(core, wait_s=NEVER_S)
        if warm_first:
            await fan_out(gate, 1, reply_after_s=0)  # warms the prefix
        return await fan_out(gate, 5)

    for core, warm_first in ((Core(), True), (Core(cache=None), False)):
        assert sorted(names(asyncio.run(scenario(core, warm_first)))) == starts(0, 5)


def test_children_on_the_batch_tier_go_together() -> None:
    """Their requests share one provider batch: a first child sent alone would hold the others
    back a whole batch round. All five start though no reply ever begins."""
    on_batch = SharedPrefix(
        key=("root", 2, "batch"),
        parent="root",
        choice=ModelChoice(provider="anthropic", model="m", tier="batch"),
        tokens=5_000,
    )
    gate = ForkCaches(Core(), wait_s=NEVER_S)
    assert sorted(names(asyncio.run(fan_out(gate, 5, prefix=on_batch)))) == starts(0, 5)
