"""AsyncGrove on real Ray and the simulator: 20 asks at once from one asyncio program while a
ticker on its loop keeps ticking, streams, fan-outs and batches from inside a running loop,
and the same through the service's API (served over the module's Grove).
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from grove.actors.turn_result import TurnResult
from grove.providers.base import Usage
from grove.server.client import RemoteGrove
from grove.supervisor import AsyncGrove, Grove, bridge
from grove.supervisor.batch.tasks import Task
from grove.supervisor.errors import CommandError
from grove.supervisor.store import open_store
from tests.integration.host_kills import kill_host
from tests.integration.readme import python_examples, run_python
from tests.integration.services import service_in_process

ASKS = 20
# Each answer streams 60 tokens at 30 a second: two seconds a turn, 40 one after another.
PACED = "[[sim tokens=60 tps=30]]"
ASK_S = 60 / 30  # how long one paced reply streams: one blocking ask stops a loop as long
TICK_S = 0.01


async def concurrent_asks(aio: AsyncGrove, roots: list[str], store_url: str | None) -> float:
    """ASKS asks at once while a ticker runs on the loop; how long they took together. Checks
    by order, not by time: the store's event log began every turn before it completed any
    (together, not one after another), and the ticker ticked after the asks were made and
    before the first of them returned (a blocking ask would stop the loop until it did)."""
    happened: list[str] = []

    async def tick() -> None:
        while True:
            happened.append("tick")
            await asyncio.sleep(TICK_S)

    async def ask(number: int, root: str) -> TurnResult:
        result = await aio.ask(root, f"{PACED} Task {number}: name a risk.")
        happened.append(f"done {number}")
        return result

    store = open_store(store_url)
    try:
        last = store.last_event_id()
        ticker = asyncio.create_task(tick())
        await asyncio.sleep(0)  # ticking
        happened.append("asked")
        start = time.perf_counter()
        results = await asyncio.gather(*(ask(n, root) for n, root in enumerate(roots)))
        took = time.perf_counter() - start
        ticker.cancel()
        turns = [
            event
            for event in store.events(after_id=last, limit=100_000)
            if event.kind in ("TurnStarted", "TurnCompleted") and event.payload["agent"] in roots
        ]
    finally:
        store.close()
    assert [result.ok for result in results] == [True] * ASKS, [r.error for r in results]
    assert all(result.text for result in results)
    kinds = [event.kind for event in turns]
    assert kinds == ["TurnStarted"] * ASKS + ["TurnCompleted"] * ASKS, kinds
    first_done = next(n for n, what in enumerate(happened) if what.startswith("done"))
    assert "tick" in happened[happened.index("asked") : first_done]
    return took


@pytest.fixture(scope="module")
def grove(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Grove]:
    from tests.integration.groves import running_grove

    with running_grove(tmp_path_factory.mktemp("grove"), hosts=2) as grove:
        yield grove


async def test_twenty_asks_at_once_leave_the_callers_loop_ticking(grove: Grove) -> None:
    aio = AsyncGrove(grove)
    roots = [(await aio.create_root("claude-sonnet-5-5")).uuid for _ in range(ASKS)]
    took = await concurrent_asks(aio, roots, grove.settings.store)
    assert took >= ASK_S  # each turn streams for two seconds


async def test_asks_made_at_once_are_begun_in_one_supervisor_call(grove: Grove) -> None:
    """20 asks at once share one `begin_turns` call (one `TurnsBegun` event); an ask for an
    unknown agent gets its own error, and a second ask for a busy agent waits its turn."""
    aio = AsyncGrove(grove)
    roots = [(await aio.create_root("claude-sonnet-5-5")).uuid for _ in range(ASKS)]
    store = open_store(grove.settings.store)
    try:
        last = max((event.id for event in store.events(limit=100_000)), default=0)
        results = await asyncio.gather(
            *(aio.ask(root, f"Task {n}: name a risk.") for n, root in enumerate(roots)),
            aio.ask("zzzz", "Anyone there?"),
            aio.ask(roots[0], "And a second one?"),
            return_exceptions=True,
        )
        events = store.events(after_id=last, limit=100_000)
    finally:
        store.close()
    answers, unknown, again = results[:ASKS], results[ASKS], results[ASKS + 1]
    assert all(isinstance(a, TurnResult) and a.ok and a.text for a in answers), answers
    assert isinstance(unknown, CommandError) and "zzzz" in str(unknown), unknown
    assert isinstance(again, TurnResult) and again.ok, again
    begun = [event.payload for event in events if event.kind == "TurnsBegun"]
    assert begun == [{"count": ASKS + 2, "started": ASKS}], begun
    started = [event.payload["agent"] for event in events if event.kind == "TurnStarted"]
    assert sorted(started) == sorted([*roots, roots[0]])
    assert (await aio.history(roots[0]))[-2].content == "And a second one?"


async def test_asks_to_forked_children_at_once_are_answered_through_few_host_calls(
    grove: Grove,
) -> None:
    """20 children of one root, asked at once: each is built with the root's conversation
    and answers its own task; their results come through a few `results`
    calls to the two hosts (one per host and wave of endings, not one per turn). A result
    awaited too briefly times out, and is there when awaited again."""
    aio = AsyncGrove(grove)
    root = (await aio.create_root("claude-sonnet-5-5")).uuid
    assert (await aio.ask(root, "The service prices orders from a queue.")).ok
    children = await asyncio.gather(*(aio.fork(root) for _ in range(ASKS)))
    turns = [aio.send(child, f"Task {n}: name a risk.") for n, child in enumerate(children)]
    await asyncio.gather(*turns)
    results = await asyncio.gather(*(turn.result() for turn in turns))
    asked = grove.turn_starts.loop_turns().results.calls
    for n, (child, result) in enumerate(zip(children, results, strict=True)):
        history = await aio.history(child)
        assert [m.content for m in history[-2:]] == [f"Task {n}: name a risk.", result.text]
        assert history[0].content == "The service prices orders from a queue."
        assert result.ok
    assert 0 < asked < ASKS / 2, asked
    # Built from the prefix they share, the asks' requests are what fork_many's child sends.
    (twin,) = await aio.fork_many(root, ["Task 0: name a risk."])
    twin_result = await aio.wait_turn(twin, 60)
    assert twin_result is not None and twin_result.ok
    assert prompt_tokens(results[0].usage) == prompt_tokens(twin_result.usage) > 0
    paced = aio.send(children[1], f"{PACED} One more risk?")
    with pytest.raises(TimeoutError, match=r"did not end within 0\.2 s"):  # as a RemoteTurn says
        await paced.result(0.2)
    again = await paced.result()
    assert again.ok and again.text == (await aio.history(children[1]))[-1].content


def prompt_tokens(usage: Usage) -> int:
    """What a request's prompt came to, read from a cache or not."""
    return usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens


async def test_streams_fan_outs_and_batches_from_a_running_loop(grove: Grove) -> None:
    aio = AsyncGrove(grove)
    root = (await aio.create_root("claude-sonnet-5-5")).uuid
    turn = aio.send(root, "Plan the release")
    streamed = "".join([text async for kind, text in turn if kind == "text"])
    result = await turn.result()
    assert result.ok and streamed == result.text and turn.agent == root

    children = await aio.fork_many(root, ["Check the docs", "Check the tests"])
    done: dict[str, Any] = {}
    while len(done) < len(children):
        done |= await aio.wait_any([c for c in children if c not in done], 30.0)
    assert all(result is not None and result.ok for result in done.values())
    assert (await aio.history(children[0]))[-1].kind == "assistant"

    tasks = [Task(id=n, key=str(n), line=n, prompt=f"Task {n}") for n in (1, 2, 3)]
    records = [step async for step in aio.run_batch(root, tasks) if step is not None]
    assert sorted(record["id"] for record in records) == [1, 2, 3]
    assert {record["status"] for record in records} == {"ok"}

    with pytest.raises(Exception, match="zzzz"):
        await aio.agent("zzzz")


async def test_results_awaited_at_once_hold_no_greenlet_each(grove: Grove) -> None:
    """While the results of asks begun at once are awaited, the loop awaits their hosts'
    calls itself: no bridged call (a greenlet) is left suspended for any of them. A
    supervisor call awaited past its timeout raises TimeoutError."""
    aio = AsyncGrove(grove)
    roots = [(await aio.create_root("claude-sonnet-5-5")).uuid for _ in range(ASKS)]
    turns = [aio.send(root, f"{PACED} Task {n}: name a risk.") for n, root in enumerate(roots)]
    await asyncio.gather(*turns)
    results = asyncio.gather(*(turn.result() for turn in turns))
    await asyncio.sleep(ASK_S / 4)
    suspended = [o for o in gc.get_objects() if isinstance(o, bridge._Bridged) and not o.dead]
    assert not results.done()
    answers = await results
    assert suspended == []
    assert all(answer.ok and answer.text for answer in answers), answers
    slow = (await aio.create_root("claude-sonnet-5-5")).uuid
    await aio.send(slow, "[[sim tokens=60 tps=2]] thirty seconds")
    with pytest.raises(TimeoutError):  # however busy the machine, the turn is under way
        await bridge.bridge(grove._answer, grove._service.wait_turn(slow, ASK_S * 20), 0.2)
    assert await aio.cancel(slow)


async def test_a_result_awaited_when_its_host_dies_is_the_resumed_turns(grove: Grove) -> None:
    """The host of a turn whose result is awaited is killed: the result awaited comes from
    the supervisor, the turn's resumed on another host (as `Turn.result` has it)."""
    aio = AsyncGrove(grove)
    root = (await aio.create_root("claude-sonnet-5-5")).uuid
    turn = aio.send(root, f"{PACED} Name a risk.")
    await turn
    waiting = asyncio.ensure_future(turn.result(120))
    await asyncio.sleep(ASK_S / 4)
    killed = await aio.provider_identity(root)
    kill_host(grove, killed["host"])
    result = await waiting
    assert result.ok and result.text == (await aio.history(root))[-1].content, result
    assert (await aio.provider_identity(root))["pid"] != killed["pid"]  # another process


def test_made_and_used_inside_asyncio_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As in Jupyter: the AsyncGrove is made, started and closed inside a running loop."""
    monkeypatch.setenv("GROVE_CONFIG_FILE", str(tmp_path / "none.toml"))
    monkeypatch.setenv("GROVE_STORE", f"sqlite:///{tmp_path / 'grove.sqlite3'}")

    async def main() -> tuple[bool, str]:
        async with AsyncGrove(simulate=True, hosts=1) as grove:
            root = await grove.create_root("gpt-6.1-terra")
            result = await grove.ask(root.uuid, "hello")
            outcome = await grove.dispatch(root.uuid, "/agents")
            return result.ok, outcome.text

    ok, agents = asyncio.run(main())
    assert ok and "gpt-6.1-terra" in agents


async def test_through_a_service_twenty_asks_leave_the_loop_ticking(
    grove: Grove, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with service_in_process(grove, tmp_path) as service:
        monkeypatch.setenv("XDG_CONFIG_HOME", service.env["XDG_CONFIG_HOME"])
        async with AsyncGrove(RemoteGrove.running()) as aio:
            roots = [(await aio.create_root("claude-sonnet-5-5")).uuid for _ in range(ASKS)]
            await concurrent_asks(aio, roots, grove.settings.store)
            streamed = [text async for kind, text in aio.send(roots[0], "again") if kind == "text"]
            forked = await aio.fork_many(roots[1], ["a", "b"])
            waited = [await aio.wait_turn(child, 60.0) for child in forked]
        _local, example = python_examples("Async")  # the README's, in a process of its own
        done = run_python(example, tmp_path, service.env)
        assert (done.returncode, done.stdout) == (0, "True\n"), done.stderr
        assert streamed and all(result is not None and result.ok for result in waited)
