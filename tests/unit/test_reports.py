"""ReportBatcher: finished turns coalesce into few calls, failed ones are sent again alone,
and every report returns once its turn is stored or the attempts ran out."""

from __future__ import annotations

import asyncio

from grove.actors.agent.choice import ModelChoice
from grove.actors.host.reports import Finished, ReportBatcher
from grove.actors.host.tickets import Ticket
from grove.actors.turn_result import TurnResult

CHOICE = ModelChoice(provider="anthropic", model="claude-sonnet-4-5")


def ticket(number: int) -> Ticket:
    return Ticket(ticket_id=f"t{number}", uuid=f"agent-{number}", user=None, choice=CHOICE)


class Supervisor:
    """Stores what it is sent, after a short delay; refuses the tickets in `refuse` a given
    number of times each."""

    def __init__(self, refuse: dict[str, int] | None = None, delay_s: float = 0.01) -> None:
        self.batches: list[list[str]] = []
        self.stored: list[str] = []
        self.refuse = dict(refuse or {})
        self.delay_s = delay_s

    async def complete_turns(self, finished: list[Finished]) -> list[str]:
        await asyncio.sleep(self.delay_s)
        ids = [t.ticket_id for t, _ in finished]
        self.batches.append(ids)
        failed = [i for i in ids if self.refuse.get(i, 0) > 0]
        for i in failed:
            self.refuse[i] -= 1
        self.stored.extend(i for i in ids if i not in failed)
        return failed


async def test_reports_arriving_during_a_call_share_the_next_one() -> None:
    supervisor = Supervisor(delay_s=0.02)
    batcher = ReportBatcher(supervisor.complete_turns)

    async def finish(number: int) -> None:
        await asyncio.sleep(number * 0.0005)
        await batcher.report(ticket(number), TurnResult(text="x"))

    await asyncio.gather(*(finish(i) for i in range(200)))
    assert sorted(supervisor.stored) == sorted(f"t{i}" for i in range(200))
    assert len(supervisor.stored) == 200
    assert batcher.calls == len(supervisor.batches) <= 10
    assert supervisor.batches[0] == ["t0"]  # the first report is not held back


async def test_a_report_returns_only_after_its_turn_is_stored() -> None:
    supervisor = Supervisor(delay_s=0.05)
    batcher = ReportBatcher(supervisor.complete_turns)
    await batcher.report(ticket(1), TurnResult())
    assert supervisor.stored == ["t1"]


async def test_refused_turns_are_sent_again_alone() -> None:
    supervisor = Supervisor(refuse={"t3": 2})
    batcher = ReportBatcher(supervisor.complete_turns, backoff_s=0.001)
    await asyncio.gather(*(batcher.report(ticket(i), TurnResult()) for i in range(5)))
    assert sorted(supervisor.stored) == [f"t{i}" for i in range(5)]
    assert supervisor.batches[-2:] == [["t3"], ["t3"]]


async def test_reports_return_when_the_attempts_run_out() -> None:
    supervisor = Supervisor(refuse={"t0": 100})
    batcher = ReportBatcher(supervisor.complete_turns, attempts=3, backoff_s=0.001)
    await asyncio.wait_for(batcher.report(ticket(0), TurnResult()), 5)
    assert supervisor.batches == [["t0"]] * 3
    assert supervisor.stored == []
    # The batcher is usable afterwards.
    await batcher.report(ticket(1), TurnResult())
    assert supervisor.stored == ["t1"]
