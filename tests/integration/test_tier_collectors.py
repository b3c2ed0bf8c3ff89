"""The supervisor's collectors of steps on the batch tier (supervisor/tiers/) against the
simulator's Message Batches over real HTTP and a real SQLite store: several agents' steps in one
batch, each answered by its own custom id at the batch price; errored and expired results sent
again, then on the standard tier; a desk restarted mid-batch polls the same batch (nothing is
sent again); cancelling cancels the vendor's batch once no other step waits on it; a batch is
deleted at the vendor once none of its steps is kept; one refused as too large goes in halves.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from grove.actors.agent.batched import BatchAnswer
from grove.providers.base import Message, ProviderName, Request
from grove.providers.http import Endpoint
from grove.providers.pricing import cost_usd
from grove.simulator import SimulatorConfig, SimulatorThread
from grove.simulator.script import generated_words
from grove.supervisor.store import SqliteStore, Store
from grove.supervisor.tiers.desk import TierDesk
from grove.supervisor.tiers.plan import BatchPlan

KEY = "sk-tier-collectors-canary-5b1e0f"
MODEL = "claude-haiku-4-5"
TOKENS = 5
FAST = BatchPlan(window_s=0.3, poll_s=0.05, poll_max_s=0.2)


@dataclass
class Events:
    """The events a desk tells, kept in order."""

    seen: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    told: asyncio.Event = field(default_factory=asyncio.Event)

    def __call__(self, kind: str, **payload: Any) -> None:
        self.seen.append((kind, payload))
        self.told.set()

    async def first(self, kind: str) -> dict[str, Any]:
        """The first event of `kind`, waited for."""
        while not self.of(kind):
            self.told.clear()
            await self.told.wait()
        return self.of(kind)[0]

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [payload for seen, payload in self.seen if seen == kind]


def simulator(**settings: Any) -> Iterator[SimulatorThread]:
    config = SimulatorConfig(api_key=KEY, tokens=TOKENS, **{"batch_delay_s": 0.2, **settings})
    with SimulatorThread(config) as running:
        yield running


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = SqliteStore(tmp_path / "grove.sqlite3")
    yield opened
    opened.close()


def plan(running: SimulatorThread, **changes: Any) -> BatchPlan:
    endpoint = Endpoint(base_url=running.base_url, api_key=KEY)
    settings = {"window_s": FAST.window_s, "poll_s": FAST.poll_s, "poll_max_s": FAST.poll_max_s}
    return BatchPlan(**{**settings, "simulator": endpoint, **changes})


class Desks:
    """The test's desks on its store, each with the events it tells (or shares); all closed
    when the test ends."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self.made: list[TierDesk] = []

    def open(self, batch_plan: BatchPlan, events: Events | None = None) -> tuple[TierDesk, Events]:
        told = events if events is not None else Events()
        desk = TierDesk(self._store, batch_plan, told)
        self.made.append(desk)
        return desk, told


@pytest.fixture
async def desks(store: Store) -> AsyncIterator[Desks]:
    opened = Desks(store)
    yield opened
    for desk in opened.made:
        await desk.aclose()


def request(prompt: str) -> Request:
    return Request(model=MODEL, messages=(Message.user(prompt),), max_tokens=64, tier="batch")


def answer(prompt: str) -> str:
    return "".join(generated_words(prompt, TOKENS))


def billed_batch_requests(running: SimulatorThread) -> int:
    return int(running.simulator.billing.by_tier.get("batch", {}).get("requests", 0))


async def asked(desk: TierDesk, prompts: dict[str, str], first: int = 1) -> dict[str, BatchAnswer]:
    """Each agent's step asked at once (named by number from `first`); answers by agent."""
    answers = await asyncio.gather(
        *(
            desk.reply(agent, "anthropic", f"{first + index:032x}", request(prompt))
            for index, (agent, prompt) in enumerate(prompts.items())
        )
    )
    return dict(zip(prompts, answers, strict=True))


PROMPTS = {f"agent-{n}": f"Question {n} about the river's mouth" for n in range(6)}


async def test_several_agents_share_a_batch_and_each_gets_its_own_answer(
    store: Store, desks: Desks
) -> None:
    for running in simulator():
        desk, events = desks.open(plan(running))
        answers = await asked(desk, PROMPTS)
        for agent, prompt in PROMPTS.items():
            turn = answers[agent].turn
            assert turn is not None, answers[agent]
            assert turn.text == answer(prompt)  # routed by custom id, whatever the order
            assert turn.cost_usd == cost_usd(MODEL, turn.usage, tier="batch") > 0
        assert [sent["requests"] for sent in events.of("BatchSent")] == [len(PROMPTS)]
        (ended,) = events.of("BatchEnded")
        assert ended["succeeded"] == len(PROMPTS) and not events.of("BatchResultsRejected")
        assert len(events.of("BatchWaiting")) == len(PROMPTS)
        assert billed_batch_requests(running) == len(PROMPTS)
        # Each answer is kept (and stored) until its agent asks for its next step: a step
        # asked again (its host died before it took the answer) gets it without a new batch.
        again = await desk.reply("agent-0", "anthropic", f"{1:032x}", request("ignored"))
        assert again == answers["agent-0"]
        assert len(store.batch_steps.all()) == len(PROMPTS)
        await asked(desk, {"agent-0": "the next step"}, first=100)
        assert f"{1:032x}" not in {record.step for record in store.batch_steps.all()}


async def test_errored_and_expired_results_go_again_then_on_the_standard_tier(
    store: Store, desks: Desks
) -> None:
    for running in simulator(batch_errored=0.25, batch_expired=0.25, seed=3):
        desk, events = desks.open(plan(running, tries=5))
        answers = await asked(desk, PROMPTS)
        assert all(a.turn is not None for a in answers.values()), answers
        assert {a.turn.text for a in answers.values() if a.turn} == set(
            map(answer, PROMPTS.values())
        )
        retried = events.of("BatchRetried")
        assert retried and {r["why"] for r in retried} <= {"errored", "expired"}
        assert len(events.of("BatchSent")) >= 2
    for running in simulator(batch_errored=1.0):
        desk, events = desks.open(plan(running, tries=2))
        answers = await asked(desk, {"agent-x": "always failing"})
        assert answers["agent-x"].standard == "2 batch tries ended errored"
        assert len(events.of("BatchSent")) == 2
        assert "agent-x" not in {record.agent for record in store.batch_steps.all()}


async def test_a_desk_restarted_mid_batch_polls_it_again_instead_of_sending_it(
    store: Store, desks: Desks
) -> None:
    for running in simulator(batch_delay_s=1.5):
        first_events = Events()
        first = TierDesk(store, plan(running), first_events)
        asking = asyncio.ensure_future(asked(first, PROMPTS))
        sent = await first_events.first("BatchSent")
        assert {r.batch_id for r in store.batch_steps.all()} == {sent["batch"]}
        asking.cancel()
        await first.aclose()  # the supervisor dies with the batch open
        foreign = store.batch_steps.all()[0].model_copy(
            update={"step": "f" * 32, "agent": "another Grove's agent", "batch_id": "msgbatch_x"}
        )
        store.batch_steps.put([foreign])
        second, events = desks.open(plan(running))
        second.resume(lambda: PROMPTS)  # the agents of the trees this Grove holds
        assert events.of("BatchesResumed") == [
            {"provider": "anthropic", "batches": 1, "steps": len(PROMPTS)}
        ]
        assert foreign in store.batch_steps.all()  # another Grove's to poll
        answers = await asked(second, PROMPTS)  # the turns resumed ask again
        assert {a.turn.text for a in answers.values() if a.turn} == set(
            map(answer, PROMPTS.values())
        )
        assert not events.of("BatchSent")
        assert billed_batch_requests(running) == len(PROMPTS)


async def test_cancel_cancels_the_vendor_batch_when_no_other_step_waits(
    store: Store, desks: Desks
) -> None:
    for running in simulator(batch_delay_s=60.0):
        desk, events = desks.open(plan(running))
        two = {"agent-a": "first of two", "agent-b": "second of two"}
        asking = asyncio.ensure_future(asked(desk, two))
        sent = await events.first("BatchSent")
        await desk.cancel("agent-a")
        assert not events.of("BatchCancelled")  # agent-b still waits on it
        await desk.cancel("agent-b")
        (cancelled,) = events.of("BatchCancelled")
        assert cancelled["batch"] == sent["batch"]
        answers = await asking
        assert answers == {agent: BatchAnswer(error="cancelled") for agent in two}
        assert not store.batch_steps.all()
        await events.first("BatchEnded")  # the vendor ends it at once, nothing answered
        assert billed_batch_requests(running) == 0


@pytest.mark.parametrize(
    ("provider", "model", "openai_api"),
    [
        ("openai", "gpt-5-mini", "responses"),
        ("openai", "gpt-5-mini", "chat"),
        ("google", "gemini-2.5-flash-lite", "responses"),
    ],
)
async def test_openai_and_gemini_batches_answer_their_steps_too(
    provider: ProviderName,
    model: str,
    openai_api: str,
    desks: Desks,
) -> None:
    for running in simulator():
        desk, events = desks.open(plan(running, openai_api=openai_api))
        prompts = {"agent-1": "What flows north?", "agent-2": "What flows south?"}
        answers = await asyncio.gather(
            *(
                desk.reply(agent, provider, f"{index:032x}", replace(request(prompt), model=model))
                for index, (agent, prompt) in enumerate(prompts.items(), start=1)
            )
        )
        for prompt, reply in zip(prompts.values(), answers, strict=True):
            assert reply.turn is not None, reply
            assert reply.turn.text == answer(prompt)
            assert reply.turn.cost_usd == cost_usd(model, reply.turn.usage, tier="batch") > 0
        assert [sent["requests"] for sent in events.of("BatchSent")] == [2]
        api = f"openai-{openai_api}" if provider == "openai" else provider
        assert set(running.simulator.billing.by_api) == {api}  # the route its steps go to


async def test_an_old_batchs_result_never_answers_a_step_asked_again_since(desks: Desks) -> None:
    for running in simulator(batch_delay_s=1.0):
        desk, events = desks.open(plan(running))
        step = f"{7:032x}"
        kept = asyncio.ensure_future(desk.reply("agent-b", "anthropic", f"{8:032x}", request("b")))
        cut = asyncio.ensure_future(desk.reply("agent-a", "anthropic", step, request("first")))
        first = await events.first("BatchSent")
        await desk.cancel("agent-a")  # agent-b still waits: the batch goes on
        assert await cut == BatchAnswer(error="cancelled")
        again = await desk.reply("agent-a", "anthropic", step, request("second"))
        assert again.turn is not None and again.turn.text == answer("second")
        assert (await kept).turn is not None
        ended = [e for e in events.of("BatchEnded") if e["batch"] == first["batch"]]
        assert ended == [
            {
                "provider": "anthropic",
                "batch": first["batch"],
                "succeeded": 1,  # agent-b's: agent-a's line there is nobody's now
                "unknown_ids": 0,
                "malformed_lines": 0,
            }
        ]


async def test_a_batch_goes_at_its_size_without_waiting_out_the_window(desks: Desks) -> None:
    for running in simulator():
        desk, events = desks.open(plan(running, window_s=600.0, size=2))
        four = {agent: prompt for agent, prompt in list(PROMPTS.items())[:4]}
        answers = await asyncio.wait_for(asked(desk, four), 60)  # long before the window
        assert all(a.turn is not None for a in answers.values())
        assert [sent["requests"] for sent in events.of("BatchSent")] == [2, 2]


async def test_a_batch_the_vendor_does_not_know_sends_its_steps_again(
    store: Store, desks: Desks
) -> None:
    for running in simulator():
        desk, events = desks.open(plan(running))
        await asked(desk, {"agent-first": "to learn the account"}, first=50)
        (known,) = store.batch_steps.all()
        lost = known.model_copy(
            update={"step": "e" * 32, "agent": "agent-lost", "batch_id": "msgbatch_01gone"}
        )
        store.batch_steps.put([lost])
        restarted, _ = desks.open(plan(running), events)
        restarted.resume(lambda: ["agent-lost"])
        again = await restarted.reply("agent-lost", "anthropic", lost.step, request("lost"))
        assert again.turn is not None and again.turn.text == answer("lost")
        assert events.of("BatchPollFailed")[0]["batch"] == "msgbatch_01gone"
        rejected = [e for e in events.of("BatchResultsRejected") if e["batch"] == lost.batch_id]
        assert rejected == [
            {
                "provider": "anthropic",
                "batch": lost.batch_id,
                "missing": 1,
                "unknown_ids": 0,
                "malformed_lines": 0,
            }
        ]


async def test_a_batch_the_vendor_refuses_fails_its_steps_without_the_key(
    store: Store, desks: Desks
) -> None:
    for running in simulator():
        wrong = "sk-wrong-key-for-tiers-0c4e9d"
        refused = plan(running, simulator=Endpoint(base_url=running.base_url, api_key=wrong))
        desk, events = desks.open(refused)
        answers = await asked(desk, {"agent-1": "hello", "agent-2": "there"})
        errors = {a.error for a in answers.values()}
        assert len(errors) == 1 and None not in errors
        (error,) = errors
        assert "401" in str(error) and wrong not in str(error)
        assert wrong not in repr(events.seen)
        assert len(events.of("BatchNotSent")) == 1 and not store.batch_steps.all()


def vendor_batch_status(running: SimulatorThread, batch_id: str) -> int:
    """The HTTP status the simulator answers a GET of the Anthropic batch with."""
    headers = {"x-api-key": KEY, "anthropic-version": "2023-06-01"}
    url = f"{running.base_url}/v1/messages/batches/{batch_id}"
    return httpx.get(url, headers=headers, timeout=10).status_code


async def test_a_batch_is_discarded_at_the_vendor_once_none_of_its_steps_is_kept(
    desks: Desks,
) -> None:
    for running in simulator():
        desk, events = desks.open(plan(running))
        await asked(desk, {"agent-1": "first", "agent-2": "second"})
        (sent,) = events.of("BatchSent")
        await asked(desk, {"agent-1": "agent one's next step"}, first=10)
        assert vendor_batch_status(running, sent["batch"]) == 200  # agent-2's step is kept
        assert not events.of("BatchDiscarded")
        await asked(desk, {"agent-2": "agent two's next step"}, first=20)
        discarded = await asyncio.wait_for(events.first("BatchDiscarded"), 60)
        assert discarded["batch"] == sent["batch"]
        assert vendor_batch_status(running, sent["batch"]) == 404
        assert len(events.of("BatchDiscarded")) == 1 and not events.of("BatchDiscardFailed")


async def test_a_batch_refused_as_too_large_is_sent_in_halves_until_each_fits(desks: Desks) -> None:
    for running in simulator(batch_max_bytes=700):  # a request or two per batch
        desk, events = desks.open(plan(running))
        answers = await asked(desk, PROMPTS)
        for agent, prompt in PROMPTS.items():
            turn = answers[agent].turn
            assert turn is not None and turn.text == answer(prompt), answers[agent]
        sent = [batch["requests"] for batch in events.of("BatchSent")]
        assert sum(sent) == len(PROMPTS) and max(sent) < len(PROMPTS)
        refused = events.of("BatchNotSent")
        assert refused and all("request_too_large" in e["error"] for e in refused)
        assert not events.of("BatchRetried")  # a split counts no try
        assert billed_batch_requests(running) == len(PROMPTS)


async def test_a_single_request_refused_as_too_large_goes_on_the_standard_tier(
    store: Store, desks: Desks
) -> None:
    for running in simulator(batch_max_bytes=50):  # no request fits
        desk, events = desks.open(plan(running))
        answers = await asked(desk, {"agent-1": "one", "agent-2": "two"})
        assert all(a.standard == "too large for a provider batch" for a in answers.values())
        assert not events.of("BatchSent") and billed_batch_requests(running) == 0
        assert store.batch_steps.all() == []
