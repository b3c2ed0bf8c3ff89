"""A turn's stream on its host (TurnRuns.stream) ends with every delta: those pushed while
a chunk was on its way to the reader, just before the turn ended, come in a last chunk."""

from __future__ import annotations

import asyncio

from grove.actors.agent.choice import ModelChoice
from grove.actors.host.core import AgentHostCore, HostParts
from grove.actors.host.runs import TurnRun
from grove.actors.host.tickets import Ticket
from grove.actors.turn_result import TurnResult
from grove.providers.stream_events import TextDelta


async def _no_report(ticket: Ticket, result: TurnResult) -> None:
    del ticket, result


def test_deltas_pushed_while_a_chunk_is_read_are_not_lost_at_the_end() -> None:
    async def scenario() -> str:
        parts = HostParts(make_provider=lambda choice: None, report=_no_report)  # type: ignore[arg-type, return-value]
        core = AgentHostCore("h", parts)
        choice = ModelChoice(provider="anthropic", model="claude-haiku-4-5")
        run = TurnRun(ticket=Ticket(ticket_id="t", uuid="a", user=None, choice=choice))
        core.runs["t"] = run
        stream = core.stream("t")
        run.push(TextDelta(index=0, text="steady "))
        read = [await anext(stream)]  # the stream waits at its yield while this is read
        run.push(TextDelta(index=0, text="review moves time care."))  # the reply's last words
        run.result = TurnResult()
        run.changed.set()
        read.extend([chunk async for chunk in stream])
        return "".join(text for chunk in read for _, text in chunk)

    assert asyncio.run(scenario()) == "steady review moves time care."
