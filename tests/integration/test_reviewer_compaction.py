"""A reviewer compacts its own context: when its history and the next delta would pass its
share of the window, its older exchanges are summarised by its own model (over real HTTP to
the simulator) and the summary leads its history.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from grove.actors.advisor import Reviewer
from grove.actors.advisor_messages import ReviewReport
from grove.actors.agent.choice import ModelChoice
from grove.actors.agent.turn_loop import Agent
from grove.providers.base import TextPart
from grove.providers.factory import create_provider
from grove.providers.http import Endpoint
from grove.simulator import SimulatorConfig, SimulatorThread

KEY = "sim-reviewer-key-91aa"
CHOICE = ModelChoice(provider="anthropic", model="claude-haiku-4-5")


@pytest.fixture(scope="module")
def endpoint() -> Iterator[Endpoint]:
    with SimulatorThread(SimulatorConfig(api_key=KEY, tokens=10)) as simulator:
        yield Endpoint(base_url=simulator.base_url, api_key=KEY)


async def test_a_reviewer_summarises_its_older_exchanges(endpoint: Endpoint) -> None:
    agent = Agent(
        "reviewer-1", CHOICE, [], lambda choice: create_provider("anthropic", endpoint=endpoint)
    )
    reports: list[ReviewReport] = []
    idle = asyncio.Event()

    async def report(review: ReviewReport) -> None:
        reports.append(review)
        if review.backlog == 0:
            idle.set()

    reviewer = Reviewer("reviewer-1", agent, report, context_window=400)  # 1,280 characters
    for n in range(6):
        idle.clear()
        reviewer.update(f"step {n}: the agent edited file_{n}.py. " + "detail " * 60)
        await asyncio.wait_for(idle.wait(), 30)
    assert all(r.ok for r in reports) and reviewer.health.compactions >= 1
    lead = agent.history[0].parts[0]
    assert isinstance(lead, TextPart) and lead.text.startswith("The earlier conversation")
    assert "<summary>" in lead.text
    assert reviewer.status()["compactions"] == reviewer.health.compactions
    await agent.provider.aclose()
