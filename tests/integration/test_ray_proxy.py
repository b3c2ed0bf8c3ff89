"""The one typed proxy over Ray actor handles, against a real local Ray: results, timeouts, a
Grove error raised as itself, streams, a dead actor reported, and nothing outside the contract.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any, Protocol

import pytest
import ray

from grove.actors.ray_proxy import RayProxy, repeatable, stream_of, streamed, timeout, waited
from grove.providers.errors import GroveError
from tests.integration.shared_ray import SHARED_RAY


class EchoAPI(Protocol):
    async def echo(self, text: str, *, times: int = 1) -> str: ...

    @timeout(0.3)
    async def slow(self, seconds: float) -> str: ...

    async def refuse(self, text: str) -> str: ...

    @repeatable
    async def pid(self) -> int: ...

    @streamed
    def count(self, upto: int) -> AsyncIterator[int]: ...


class Echo:
    async def echo(self, text: str, *, times: int = 1) -> str:
        return text * times

    async def slow(self, seconds: float) -> str:
        await asyncio.sleep(seconds)
        return "late"

    async def refuse(self, text: str) -> str:
        raise GroveError(f"refused: {text}")

    async def pid(self) -> int:
        import os

        return os.getpid()

    async def count(self, upto: int) -> AsyncIterator[int]:
        for number in range(upto):
            yield number

    def internal(self) -> str:
        return "not in the contract"


class ActorGone(GroveError):
    """What a caller sees of the echo actor's death in these tests."""


@pytest.fixture(scope="module")
def echo_actor() -> Iterator[Any]:
    SHARED_RAY.ensure()
    handle: Any = ray.remote(Echo).options(max_concurrency=8).remote()
    yield handle
    ray.kill(handle)


def test_calls_are_typed_and_answered(echo_actor: Any) -> None:
    proxy = RayProxy[EchoAPI](echo_actor, EchoAPI)

    async def go() -> tuple[str, list[int]]:
        text = await proxy.call.echo("ab", times=3)
        numbers = [number async for number in proxy.call.count(4)]
        return text, numbers

    assert asyncio.run(go()) == ("ababab", [0, 1, 2, 3])
    # Outside a loop, a caller waits on the call's reference its own way.
    call = waited(proxy.call.echo("x"))
    assert ray.get(call.ref(), timeout=call.timeout_s) == "x"
    refs = stream_of(proxy.call.count(2)).refs()
    assert [ray.get(ref) for ref in refs] == [0, 1]


def test_a_grove_error_is_raised_as_itself_and_timeouts_hold(echo_actor: Any) -> None:
    proxy = RayProxy[EchoAPI](echo_actor, EchoAPI)

    async def refused() -> str:
        return await proxy.call.refuse("no")

    with pytest.raises(GroveError, match="refused: no") as caught:
        asyncio.run(refused())
    assert type(caught.value) is GroveError

    async def slow() -> str:
        return await proxy.call.slow(5.0)

    with pytest.raises(TimeoutError):
        asyncio.run(slow())
    assert waited(proxy.call.slow(0.0)).timeout_s == 0.3
    assert waited(proxy.call.pid()).repeatable
    assert not waited(proxy.call.echo("x")).repeatable


def test_only_the_contract_can_be_called(echo_actor: Any) -> None:
    proxy = RayProxy[EchoAPI](echo_actor, EchoAPI)
    with pytest.raises(AttributeError):
        proxy.call.internal()  # type: ignore[attr-defined]


def dead(handle: Any, attempts: int = 100) -> None:
    """Until a call of the actor's own (not through a proxy) fails as a dead actor's: `ray.kill`
    only asks for the death, and a loaded machine may serve one more call before it comes."""
    for _ in range(attempts):
        try:
            ray.get(handle.pid.remote(), timeout=10)
        except ray.exceptions.RayActorError:
            return
    raise AssertionError(f"the actor still answered {attempts} calls after ray.kill")


def test_a_dead_actor_is_reported_then_raised_as_the_death_error() -> None:
    SHARED_RAY.ensure()
    handle: Any = ray.remote(Echo).remote()
    deaths: list[int] = []

    async def died(proxy: RayProxy[EchoAPI], incarnation: int) -> None:
        deaths.append(incarnation)
        proxy.replace(ray.remote(Echo).remote())

    proxy = RayProxy[EchoAPI](
        handle, EchoAPI, on_death=died, death_error=lambda exc: ActorGone("the echo died")
    )

    async def go() -> tuple[int, str]:
        first = await proxy.call.pid()
        ray.kill(handle)
        await asyncio.to_thread(dead, handle)
        with pytest.raises(ActorGone, match="the echo died"):
            await proxy.call.echo("lost")
        return first, await proxy.call.echo("again")

    first, again = asyncio.run(go())
    assert again == "again" and deaths == [0] and proxy.incarnation == 1
    assert ray.get(waited(proxy.call.pid()).ref()) != first
    ray.kill(proxy.handle)
