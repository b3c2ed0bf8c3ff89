"""The vendors' SDKs as referees of the simulator's batch and flex tiers, over real HTTP:
Anthropic's Message Batches, OpenAI's Files and Batch APIs and flex tier, Gemini's batch mode
and flex tier. A batch ends after its delay with every answer under its own custom id, in a
shuffled order (Gemini: in order, as that API gives them), the configured shares errored and
expired; cancel stops one; unknown ids and malformed input get the vendors' refusals."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import anthropic
import pytest

from grove.simulator import SimulatorConfig, SimulatorThread
from grove.simulator.script import generated_words

KEY = "sim-sdk-batches-key-51c3"
TOKENS = 4
DELAY_S = 0.3
PROMPTS = {f"task-{number}": f"Question number {number} about rivers" for number in range(8)}
CLAUDE = "claude-sonnet-4-6"
GPT = "gpt-5-mini"
GEMINI = "gemini-2.5-flash-lite"
Polled = TypeVar("Polled")


def answer(prompt: str) -> str:
    return "".join(generated_words(prompt, TOKENS))


def running(**settings: Any) -> Iterator[SimulatorThread]:
    config = SimulatorConfig(api_key=KEY, tokens=TOKENS, batch_delay_s=DELAY_S, **settings)
    with SimulatorThread(config) as simulator:
        yield simulator


@pytest.fixture(scope="module")
def plain() -> Iterator[SimulatorThread]:
    """Every batched request answered."""
    yield from running()


@pytest.fixture(scope="module")
def shares() -> Iterator[SimulatorThread]:
    """A quarter of each batch errored, a quarter expired, drawn from a fixed seed."""
    yield from running(batch_errored=0.25, batch_expired=0.25, seed=11)


@pytest.fixture(scope="module")
def slow() -> Iterator[SimulatorThread]:
    """Batches that would take a minute: there is time to cancel them."""
    config = SimulatorConfig(api_key=KEY, tokens=TOKENS, batch_delay_s=60.0)
    with SimulatorThread(config) as simulator:
        yield simulator


@pytest.fixture(scope="module")
def flex() -> Iterator[SimulatorThread]:
    """Half the flex requests refused for want of capacity."""
    yield from running(flex_unavailable=0.5)


def poll(get: Callable[[], Polled], done: Callable[[Polled], bool]) -> Polled:
    deadline = time.monotonic() + 20.0
    while True:
        polled = get()
        if done(polled) or time.monotonic() > deadline:
            return polled
        time.sleep(0.05)


# --- Anthropic ----------------------------------------------------------------------------------


def claude(simulator: SimulatorThread) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key=KEY, base_url=simulator.base_url, max_retries=0)


def claude_requests(prompts: dict[str, str]) -> list[Any]:
    return [
        {
            "custom_id": custom_id,
            "params": {
                "model": CLAUDE,
                "max_tokens": 256,
                "messages": [{"role": "user", "content": prompt}],
            },
        }
        for custom_id, prompt in prompts.items()
    ]


def test_anthropic_batch_ends_with_each_answer_under_its_custom_id(
    plain: SimulatorThread,
) -> None:
    client = claude(plain)
    created = client.messages.batches.create(requests=claude_requests(PROMPTS))
    assert created.processing_status == "in_progress"
    assert created.request_counts.processing == len(PROMPTS)
    assert created.results_url is None
    ended = poll(
        lambda: client.messages.batches.retrieve(created.id),
        lambda batch: batch.processing_status == "ended",
    )
    assert ended.processing_status == "ended"
    assert ended.request_counts.succeeded == len(PROMPTS)
    assert ended.request_counts.processing == 0
    assert ended.ended_at is not None and ended.ended_at >= created.created_at
    results = list(client.messages.batches.results(created.id))
    assert sorted(result.custom_id for result in results) == sorted(PROMPTS)
    assert [result.custom_id for result in results] != list(PROMPTS)  # shuffled
    for result in results:
        assert result.result.type == "succeeded"
        message = result.result.message
        assert message.content[0].text == answer(PROMPTS[result.custom_id])  # type: ignore[union-attr]
        assert message.usage.input_tokens > 0
    assert plain.simulator.billing.by_tier["batch"]["requests"] >= len(PROMPTS)
    listed = [batch.id for batch in client.messages.batches.list(limit=20)]
    assert created.id in listed


def test_anthropic_batch_errored_and_expired_shares(shares: SimulatorThread) -> None:
    client = claude(shares)
    created = client.messages.batches.create(requests=claude_requests(PROMPTS))
    ended = poll(
        lambda: client.messages.batches.retrieve(created.id),
        lambda batch: batch.processing_status == "ended",
    )
    counts = ended.request_counts
    assert (counts.succeeded, counts.errored, counts.expired, counts.canceled) == (4, 2, 2, 0)
    results = {
        result.custom_id: result.result for result in client.messages.batches.results(created.id)
    }
    assert sorted(results) == sorted(PROMPTS)
    kinds = sorted(result.type for result in results.values())
    assert kinds == ["errored"] * 2 + ["expired"] * 2 + ["succeeded"] * 4
    for custom_id, result in results.items():
        if result.type == "errored":
            assert result.error.error.type == "api_error"
        if result.type == "succeeded":
            assert result.message.content[0].text == answer(PROMPTS[custom_id])  # type: ignore[union-attr]


def test_anthropic_batch_request_the_api_refuses_is_an_errored_result(
    plain: SimulatorThread,
) -> None:
    client = claude(plain)
    requests = claude_requests({"fine": "Name a river", "refused": "Name a lake"})
    requests[1]["params"]["thinking"] = {"type": "enabled", "budget_tokens": 100}
    created = client.messages.batches.create(requests=requests)
    poll(
        lambda: client.messages.batches.retrieve(created.id),
        lambda batch: batch.processing_status == "ended",
    )
    results = {
        result.custom_id: result.result for result in client.messages.batches.results(created.id)
    }
    assert results["fine"].type == "succeeded"
    refused = results["refused"]
    assert refused.type == "errored"
    assert refused.error.error.type == "invalid_request_error"
    assert "budget_tokens" in refused.error.error.message


def test_anthropic_batch_cancel(slow: SimulatorThread) -> None:
    client = claude(slow)
    created = client.messages.batches.create(requests=claude_requests(PROMPTS))
    canceling = client.messages.batches.cancel(created.id)
    assert canceling.processing_status == "canceling"
    assert canceling.cancel_initiated_at is not None
    ended = client.messages.batches.retrieve(created.id)
    assert ended.processing_status == "ended"
    assert ended.request_counts.canceled == len(PROMPTS)
    results = list(client.messages.batches.results(created.id))
    assert {result.result.type for result in results} == {"canceled"}
    assert slow.simulator.billing.by_tier.get("batch") is None  # nothing was answered


def test_anthropic_unknown_batch_is_not_found(plain: SimulatorThread) -> None:
    with pytest.raises(anthropic.NotFoundError) as raised:
        claude(plain).messages.batches.retrieve("msgbatch_01NoSuchBatch")
    assert raised.value.status_code == 404
    assert raised.value.body["error"]["type"] == "not_found_error"  # type: ignore[index]


def test_anthropic_batch_with_a_repeated_custom_id_is_refused(plain: SimulatorThread) -> None:
    requests = claude_requests({"same": "one"}) * 2
    with pytest.raises(anthropic.BadRequestError) as raised:
        claude(plain).messages.batches.create(requests=requests)
    assert "same" in str(raised.value)
