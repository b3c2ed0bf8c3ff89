"""The simulator's batch book and flex gate as pure parts: settings checked, the errored and
expired shares drawn exactly and repeatably from the seed, cancel, the flex share spread evenly."""

from __future__ import annotations

from typing import Any

import pytest

from grove.simulator.batches import BatchBook, BatchedRequest
from grove.simulator.config import SimulatorConfig
from grove.simulator.flex import FlexGate, flex_requested, openai_tier
from grove.simulator.wire import Reply


def echo(path: str, body: dict[str, Any]) -> Reply:
    """Answers as a vendor would, refusing a body marked `refuse`."""
    if body.get("refuse"):
        return Reply(status=400, body={"error": "refused"})
    return Reply(status=200, body={"path": path, **body})


def requests(count: int) -> list[BatchedRequest]:
    return [BatchedRequest(f"r{n}", "/v1/messages", {"n": n}) for n in range(count)]


def outcomes(seed: int) -> list[tuple[str, str]]:
    config = SimulatorConfig(batch_errored=0.2, batch_expired=0.3, seed=seed)
    book = BatchBook(config, echo)
    book.create("anthropic", "b1", requests(10))
    batch = book.find("anthropic", "b1")
    assert batch is not None and batch.ended
    return [(result.request.custom_id, result.outcome) for result in batch.results]


def test_shares_are_exact_and_repeat_with_the_seed() -> None:
    first = outcomes(seed=4)
    kinds = sorted(outcome for _, outcome in first)
    assert kinds == ["errored"] * 2 + ["expired"] * 3 + ["succeeded"] * 5
    assert sorted(custom_id for custom_id, _ in first) == sorted(f"r{n}" for n in range(10))
    assert outcomes(seed=4) == first
    assert outcomes(seed=5) != first


def test_a_request_the_api_refuses_is_errored_with_its_reply() -> None:
    book = BatchBook(SimulatorConfig(), echo)
    given = [BatchedRequest("ok", "/p", {}), BatchedRequest("no", "/p", {"refuse": True})]
    book.create("openai", "b", given)
    batch = book.find("openai", "b")
    assert batch is not None
    results = {result.request.custom_id: result for result in batch.results}
    assert results["ok"].outcome == "succeeded"
    assert results["ok"].reply is not None and results["ok"].reply.body["path"] == "/p"
    assert results["no"].outcome == "errored"
    assert results["no"].reply is not None and results["no"].reply.status == 400


def test_a_batch_waits_its_delay_and_a_cancel_ends_it_unanswered() -> None:
    answered: list[str] = []

    def counting(path: str, body: dict[str, Any]) -> Reply:
        answered.append(path)
        return echo(path, body)

    book = BatchBook(SimulatorConfig(batch_delay_s=3600), counting)
    batch = book.create("google", "slow", requests(3))
    assert book.find("google", "slow") is batch
    assert batch.ended_at is None
    assert book.find("anthropic", "slow") is None  # another vendor's id space
    book.cancel(batch)
    canceled = book.find("google", "slow")
    assert canceled is not None and canceled.ended_at is not None
    assert [result.outcome for result in canceled.results] == ["canceled"] * 3
    assert answered == []


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"batch_errored": 1.5}, "batch_errored"),
        ({"batch_expired": -0.1}, "batch_expired"),
        ({"flex_unavailable": 2.0}, "flex_unavailable"),
        ({"batch_errored": 0.6, "batch_expired": 0.6}, "add up to 1"),
        ({"batch_delay_s": -1.0}, "batch_delay_s"),
    ],
)
def test_bad_settings_are_refused(settings: dict[str, Any], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        SimulatorConfig(**settings)


def test_flex_gate_refuses_its_share_evenly() -> None:
    quarter = FlexGate(0.25)
    assert [quarter.refuses() for _ in range(8)] == [False, False, False, True] * 2
    assert quarter.refused == 2
    never, always = FlexGate(0.0), FlexGate(1.0)
    assert not any(never.refuses() for _ in range(5))
    assert all(always.refuses() for _ in range(5))


def test_flex_is_asked_on_openai_and_gemini_only() -> None:
    assert flex_requested("openai-chat", {"service_tier": "flex"})
    assert flex_requested("openai-responses", {"service_tier": "flex"})
    assert flex_requested("google", {"serviceTier": "FLEX"})
    assert not flex_requested("openai-responses", {"service_tier": "auto"})
    assert not flex_requested("anthropic", {"service_tier": "flex"})
    assert (openai_tier({"service_tier": "flex"}), openai_tier({})) == ("flex", "default")
