"""What a host asks of the supervisor, through the gates of actors/host/supervisor_gates.py, on a
real local Ray: a stand-in supervisor actor answers as the real one does (waits, holds,
refusals), and the gates wait, ask again, batch and raise as the turn loop expects.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
import ray

from grove.actors.agent.choice import ModelChoice
from grove.actors.contract import SupervisorAPI
from grove.actors.errors import BudgetStop, ToolRefused
from grove.actors.host.supervisor_gates import BudgetGate, FleetGate, ToolGate, TurnRecords
from grove.actors.host.tickets import Ticket
from grove.actors.ray_proxy import RayProxy
from grove.actors.telemetry import NO_TRACING
from grove.actors.turn_result import NewEntry, TurnResult
from grove.providers.base import Tier
from tests.integration.shared_ray import SHARED_RAY

CHOICE = ModelChoice(provider="anthropic", model="claude-haiku-4-5")


class StandInSupervisor:
    """Answers hosts' asks the way the supervisor's contract says: a fleet slot after one wait,
    a budget hold after one wait (or a refusal for agent "broke"), tools refused by name,
    steps stored unless their turn is "lost", reports stored unless their ticket is "lost"."""

    def __init__(self) -> None:
        self.asked: dict[str, list[Any]] = {}

    def _note(self, name: str, value: Any) -> None:
        self.asked.setdefault(name, []).append(value)

    async def fleet_acquire_many(self, requests: list[tuple[str, int]]) -> list[float]:
        self._note("fleet_acquire_many", requests)
        first = len(self.asked["fleet_acquire_many"]) == 1
        return [0.05 if first else 0.0 for _ in requests]

    async def budget_reserve_many(
        self, requests: list[tuple[str, str, int, int | None, Tier]]
    ) -> list[tuple[str, Any]]:
        self._note("budget_reserve_many", requests)
        first = len(self.asked["budget_reserve_many"]) == 1
        answers: list[tuple[str, Any]] = []
        for uuid, _, tokens, _, _ in requests:
            if uuid == "broke":
                answers.append(("refused", "the tree's budget is spent"))
            else:
                answers.append(("wait", 0.05) if first else ("held", {"tokens": tokens}))
        return answers

    async def budget_extend(
        self, uuid: str, model: str, hold: Any, more: int
    ) -> tuple[bool, str | None, Any]:
        if uuid == "broke":
            return False, "no room for more", None
        return True, None, {**hold, "tokens": hold["tokens"] + more}

    async def tool_call(
        self, agent: str, tool: str, arguments: dict[str, Any], trace: str | None = None
    ) -> tuple[bool, str]:
        if tool == "forbidden":
            return False, f"{agent} may not call {tool}"
        return True, f"{tool} ran for {agent}"

    async def advise(self, reviewer: str, arguments: dict[str, Any]) -> tuple[bool, str]:
        return False, "advice is off"

    async def store_steps(self, steps: list[tuple[Ticket, int, NewEntry]]) -> list[int | None]:
        self._note("store_steps", len(steps))
        return [None if t.ticket_id == "lost" else 100 + index for t, index, _ in steps]

    async def complete_turns(self, finished: list[tuple[Ticket, TurnResult]]) -> list[str]:
        return [ticket.ticket_id for ticket, _ in finished if ticket.ticket_id == "lost"]

    async def calls(self) -> dict[str, list[Any]]:
        return self.asked


@pytest.fixture
def supervisor() -> Iterator[RayProxy[SupervisorAPI]]:
    SHARED_RAY.ensure()
    handle: Any = ray.remote(StandInSupervisor).remote()
    yield RayProxy[SupervisorAPI](handle, SupervisorAPI)
    ray.kill(handle)


def asked(proxy: RayProxy[SupervisorAPI]) -> dict[str, list[Any]]:
    calls: dict[str, list[Any]] = ray.get(proxy.handle.calls.remote())
    return calls


def ticket(ticket_id: str) -> Ticket:
    return Ticket(ticket_id=ticket_id, uuid="a", user=None, choice=CHOICE)


def test_the_fleet_gate_waits_as_told_and_asks_for_many_agents_at_once(
    supervisor: RayProxy[SupervisorAPI],
) -> None:
    gate = FleetGate(supervisor, frozenset({"anthropic"}))

    async def go() -> None:
        await asyncio.gather(*(gate.acquire("anthropic", 100 * n) for n in range(1, 4)))

    asyncio.run(go())
    batches = asked(supervisor)["fleet_acquire_many"]
    # One call for the three agents, told to wait; then each asks once more, and may go.
    assert batches[0] == [("anthropic", 100), ("anthropic", 200), ("anthropic", 300)]
    assert sorted(request for batch in batches[1:] for request in batch) == batches[0]


def test_the_budget_gate_holds_after_waiting_and_raises_a_refusal(
    supervisor: RayProxy[SupervisorAPI],
) -> None:
    gate = BudgetGate(supervisor)

    async def go() -> tuple[Any, Any]:
        hold = await gate.reserve("a", CHOICE.model, 50, None, "standard")
        return hold, await gate.extend("a", CHOICE.model, hold, 10)

    hold, larger = asyncio.run(go())
    assert hold == {"tokens": 50} and larger == {"tokens": 60}
    with pytest.raises(BudgetStop, match="the tree's budget is spent"):
        asyncio.run(gate.reserve("broke", CHOICE.model, 50, None, "standard"))
    with pytest.raises(BudgetStop, match="no room for more"):
        asyncio.run(gate.extend("broke", CHOICE.model, hold, 10))


def test_the_tool_gate_answers_and_refuses_as_the_supervisor_rules(
    supervisor: RayProxy[SupervisorAPI],
) -> None:
    gate = ToolGate(supervisor, NO_TRACING)
    assert asyncio.run(gate.call("a", "wait", {"timeout": 0.5})) == "wait ran for a"
    with pytest.raises(ToolRefused, match="a may not call forbidden"):
        asyncio.run(gate.call("a", "forbidden", {}))
    with pytest.raises(ToolRefused, match="advice is off"):
        asyncio.run(gate.advise("r", {"note": "x"}))


def test_turn_records_store_steps_together_and_say_what_was_not_stored(
    supervisor: RayProxy[SupervisorAPI],
) -> None:
    records = TurnRecords(supervisor)
    entry = NewEntry(kind="assistant", content="", data={})

    async def go() -> tuple[list[int] | None, list[int] | None, list[str]]:
        kept = await records.store_steps(ticket("t"), [(0, entry), (1, entry)])
        refused = await records.store_steps(ticket("lost"), [(0, entry)])
        reports = await records.send_reports(
            [(ticket("t"), TurnResult()), (ticket("lost"), TurnResult())]
        )
        return kept, refused, reports

    kept, refused, not_stored = asyncio.run(go())
    assert kept == [100, 101] and refused is None and not_stored == ["lost"]


def test_turn_records_count_every_report_as_not_stored_when_the_supervisor_is_gone(
    supervisor: RayProxy[SupervisorAPI],
) -> None:
    ray.kill(supervisor.handle)
    records = TurnRecords(supervisor)
    finished = [(ticket("t"), TurnResult())]
    assert asyncio.run(records.send_reports(finished)) == ["t"]
    entry = NewEntry(kind="assistant", content="", data={})
    assert asyncio.run(records.store_steps(ticket("t"), [(0, entry)])) is None
