"""A turn's stream on its host (TurnRuns.stream) ends with every delta: those pushed while
a chunk was on its way to the reader, just before the turn ended, come in a last chunk. The
host keeps the deltas as they came; its caller and each watcher read them masked."""

from __future__ import annotations

import asyncio

from grove.actors.agent.choice import ModelChoice
from grove.actors.host.core import AgentHostCore, HostParts
from grove.actors.host.runs import TurnRun
from grove.actors.host.tickets import Ticket
from grove.actors.turn_result import TurnResult
from grove.providers.secrets import MASK
from grove.providers.stream_events import ProviderWarning, TextDelta

KEY = "sk-proj-" + "5f1e" * 8  # a key of OpenAI's shape, never loaded


async def _no_report(ticket: Ticket, result: TurnResult) -> None:
    del ticket, result


def _host_running_a_turn() -> tuple[AgentHostCore, TurnRun]:
    parts = HostParts(make_provider=lambda choice: None, report=_no_report)  # type: ignore[arg-type, return-value]
    core = AgentHostCore("h", parts)
    choice = ModelChoice(provider="anthropic", model="claude-haiku-4-5")
    run = TurnRun(ticket=Ticket(ticket_id="t", uuid="a", user=None, choice=choice))
    core.runs["t"] = run
    return core, run


def test_deltas_pushed_while_a_chunk_is_read_are_not_lost_at_the_end() -> None:
    async def scenario() -> str:
        core, run = _host_running_a_turn()
        stream = core.stream("t")
        run.push(TextDelta(index=0, text="steady "))
        read = [await anext(stream)]  # the stream waits at its yield while this is read
        run.push(TextDelta(index=0, text="review moves time care."))  # the reply's last words
        run.result = TurnResult()
        run.changed.set()
        read.extend([chunk async for chunk in stream])
        return "".join(text for chunk in read for _, text in chunk)

    assert asyncio.run(scenario()) == "steady review moves time care."


def test_a_key_split_between_deltas_reaches_the_caller_and_a_watcher_masked() -> None:
    """The key comes in three deltas, the first two read by the caller before the third is
    pushed, and a warning comes between: the caller, a watcher there from the start and one
    who comes after the end each read the same text, the key masked, the warning after the
    text held before it."""

    async def scenario() -> tuple[list[tuple[str, str]], ...]:
        core, run = _host_running_a_turn()
        stream, watch = core.stream("t"), core.watch("a", "t")
        watching = asyncio.ensure_future(_chunks(watch))
        await asyncio.sleep(0)  # the watcher is there
        run.push(TextDelta(index=0, text=f"use {KEY[:6]}"))
        run.push(TextDelta(index=0, text=KEY[6:20]))
        caller = list(await anext(stream))
        run.push(TextDelta(index=0, text=KEY[20:] + " now"))
        run.push(ProviderWarning(text="slow"))
        run.push(TextDelta(index=0, text=" done"))
        run.result = TurnResult()
        core.ended(run, run.result)
        caller.extend(await _chunks(stream))
        late = await _chunks(core.watch("a", "t"))
        return caller, await watching, late

    for shown in asyncio.run(scenario()):
        expected = [("text", f"use sk-{MASK} now"), ("notice", "slow"), ("text", " done")]
        assert _joined(shown) == expected
        assert KEY not in repr(shown)


async def _chunks(reading: object) -> list[tuple[str, str]]:
    return [item async for chunk in reading for item in chunk]  # type: ignore[attr-defined]


def _joined(shown: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Runs of one kind joined: readers may split a run where their chunks fell."""
    joined: list[tuple[str, str]] = []
    for kind, text in shown:
        if joined and joined[-1][0] == kind:
            joined[-1] = (kind, joined[-1][1] + text)
        else:
            joined.append((kind, text))
    return joined
