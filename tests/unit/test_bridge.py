"""supervisor/bridge.py on its own, and AsyncGrove's twins of Grove's methods: every public
method has one, with Grove's signature, of the right kind (no Ray needed)."""

from __future__ import annotations

import asyncio
import http.server
import inspect
import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from grove.supervisor import bridge
from grove.supervisor.api import Grove
from grove.supervisor.async_api import AsyncGrove, AsyncTurn


def slow_sum(values: list[float]) -> float:
    """Sync code waiting as Grove's methods do: blocking alone, awaited when bridged."""
    total = 0.0
    for value in values:
        bridge.sleep(value)
        total += value
    return total


def test_unbridged_waits_block_and_answer() -> None:
    assert not bridge.bridged()
    start = time.perf_counter()
    assert slow_sum([0.05, 0.05]) == pytest.approx(0.1)
    assert time.perf_counter() - start >= 0.1
    waiting = asyncio.sleep(0)
    with pytest.raises(RuntimeError, match="outside a bridged call"):
        bridge.awaited(waiting)
    waiting.close()


async def test_bridged_calls_wait_on_the_loop_together() -> None:
    """Fifty calls each waiting twice: every one has begun before any ends, and the loop's
    ticker runs between their waits. One after another (or a wait holding the loop) would
    end the first call before the second began, with no tick in between."""
    happened: list[str] = []

    def logged_sum(number: int) -> float:
        happened.append(f"begin {number}")
        total = slow_sum([0.1, 0.1])
        happened.append(f"end {number}")
        return total

    async def tick() -> None:
        while True:
            happened.append("tick")
            await asyncio.sleep(0.005)

    ticking = asyncio.create_task(tick())
    await asyncio.sleep(0)  # the first tick
    totals = await asyncio.gather(*(bridge.bridge(logged_sum, n) for n in range(50)))
    ticking.cancel()
    assert totals == [pytest.approx(0.2)] * 50
    calls = [event for event in happened if event != "tick"]
    assert sorted(calls[:50]) == sorted(f"begin {n}" for n in range(50))
    first_end = happened.index(calls[50])
    assert "tick" in happened[happened.index(calls[49]) : first_end]  # while all wait


async def test_a_bridged_call_waits_on_the_loop_for_a_future_another_call_settles() -> None:
    """One bridged call waits for what another, on the same loop, is still working on."""
    shared: Future[str] = Future()

    def settle() -> None:
        bridge.sleep(0.05)
        shared.set_result("listed")

    waited, _ = await asyncio.gather(bridge.bridge(bridge.waited, shared), bridge.bridge(settle))
    assert waited == "listed"
    assert bridge.waited(shared) == "listed"  # settled: no loop needed


async def test_a_bridged_call_raises_what_it_raised_and_sees_what_its_wait_raised() -> None:
    def fails() -> None:
        raise ValueError("no such agent")

    with pytest.raises(ValueError, match="no such agent"):
        await bridge.bridge(fails)

    def catches() -> str:
        try:
            bridge.run(asyncio.wait_for(asyncio.sleep(10), 0.01))
        except TimeoutError:
            return "timed out"
        return "slept"

    assert await bridge.bridge(catches) == "timed out"


async def test_cancelling_a_bridged_call_ends_it() -> None:
    reached: list[str] = []

    def waits() -> None:
        try:
            bridge.sleep(10)
        finally:
            reached.append("finally")

    call = asyncio.ensure_future(bridge.bridge(waits))
    await asyncio.sleep(0.05)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert reached == ["finally"]


async def test_a_bridged_iterator_steps_a_sync_generator() -> None:
    def counted() -> Iterator[int]:
        for number in range(3):
            bridge.sleep(0.01)
            yield number

    assert [n async for n in bridge.bridged_iterator(counted())] == [0, 1, 2]


def public_methods() -> dict[str, Callable[..., Any]]:
    """Grove's public methods: what AsyncGrove has a twin of."""
    members = inspect.getmembers(Grove, inspect.isfunction)
    return {name: member for name, member in members if not name.startswith("_")}


def kind_of(method: Callable[..., Any]) -> str:
    """How `method`'s twin hands back what it returns: "iterator" (an async iterator),
    "turn" (an AsyncTurn) or "value"."""
    returns = str(inspect.signature(method).return_annotation)
    if returns.startswith("Iterator["):
        return "iterator"
    return "turn" if returns.split(" | ")[0] == "Turn" else "value"


def test_every_public_grove_method_has_an_async_twin_with_its_signature() -> None:
    methods = public_methods()
    assert {"ask", "send", "fork_many", "wait_any", "run_batch", "watch", "start"} <= set(methods)
    for name, method in methods.items():
        twin = getattr(AsyncGrove, name)
        assert inspect.signature(twin) == inspect.signature(method), name
        assert twin.__doc__ == method.__doc__
        kind = kind_of(method)
        if kind == "iterator":
            assert not inspect.iscoroutinefunction(twin), name
        elif kind == "turn":
            assert inspect.signature(method).return_annotation in ("Turn", "Turn | None")
        else:
            assert inspect.iscoroutinefunction(twin), name
    assert kind_of(Grove.run_batch) == kind_of(Grove.watch) == "iterator"
    assert kind_of(Grove.send) == kind_of(Grove.command_turn) == "turn"


async def test_a_turn_twin_is_an_async_turn_started_once() -> None:
    starts: list[int] = []

    async def start() -> None:
        starts.append(1)

    turn = AsyncTurn(start)
    assert await turn is None  # a command that started no turn
    assert [delta async for delta in turn] == []
    assert starts == [1]


def test_asyncgrove_takes_a_grove_or_its_options_not_both() -> None:
    grove = Grove(simulate=True)
    assert AsyncGrove(grove).grove is grove
    made = AsyncGrove(simulate=True, hosts=2).grove
    assert isinstance(made, Grove) and made.hosts == 2
    with pytest.raises(TypeError, match="not both"):
        AsyncGrove(grove, simulate=True)


async def test_a_batch_follower_waiting_for_its_service_to_return_keeps_the_loop_going(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`AsyncGrove(RemoteGrove.running())`: while a batch's service is down, its follower
    waits a second at a time; the caller's loop goes on meanwhile."""
    from grove.server.client import RemoteGrove
    from grove.server.files import ServiceState

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))  # no service is recorded there
    remote = RemoteGrove(ServiceState(pid=1, host="127.0.0.1", port=9, started=1.0))
    waiting = remote._come_back("batch-1", early_ends=0)
    happened: list[str] = []

    def follow() -> None:
        happened.append("began")
        assert next(waiting) is None  # no service: a tick
        happened.append("ended")

    async def tick() -> None:
        while True:
            happened.append("tick")
            await asyncio.sleep(0.01)

    ticking = asyncio.create_task(tick())
    try:
        await bridge.bridge(follow)
        start = time.perf_counter()
        await bridge.bridge(follow)  # a second later, the next one
        took = time.perf_counter() - start
    finally:
        ticking.cancel()
        waiting.close()
    assert took >= 0.9
    second = happened[happened.index("began", happened.index("ended")) :]
    assert second.index("ended") > 2  # the loop ticked while the follower waited


def test_a_batch_follower_follows_a_stopping_service_again_and_gives_up_on_one_that_never_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stopping service ends its streams while it still answers: the follower follows the
    same service again after a second; one that ended the stream early five times in a row,
    nothing new between, is an error."""
    from grove.server.client import EARLY_ENDS_ALLOWED, RemoteGrove
    from grove.server.files import ServiceState, write_state
    from grove.server.service_link import RemoteError

    class Healthy(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200 if self.path == "/healthz" else 404)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), Healthy) as server:
        serving = threading.Thread(target=server.serve_forever)
        serving.start()
        try:
            state = ServiceState(
                pid=os.getpid(), host="127.0.0.1", port=server.server_address[1], started=2.0
            )
            write_state(state)
            remote = RemoteGrove(state)
            again = remote._come_back("batch-1", early_ends=1)
            assert next(again) is None
            start = time.perf_counter()
            with pytest.raises(StopIteration):
                next(again)  # a second later: follow it again
            assert time.perf_counter() - start >= 0.9
            assert remote.started == 2.0
            never = remote._come_back("batch-1", early_ends=EARLY_ENDS_ALLOWED)
            with pytest.raises(RemoteError, match="ended a stream early"):
                next(never)
        finally:
            server.shutdown()
            serving.join()
