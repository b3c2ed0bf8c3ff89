"""Routing a provider batch's results to its steps (supervisor/tiers/routing.py): each step by
its own custom id whatever the order; unknown ids, unreadable lines and steps without a line
counted and reported, never mapped to the wrong step."""

from __future__ import annotations

from grove.providers.base import AssistantTurn, Message, Usage
from grove.providers.batch_wire import BatchOutcome, BatchResults
from grove.supervisor.tiers.routing import routed


def reply(text: str) -> AssistantTurn:
    return AssistantTurn(
        provider="anthropic",
        model="claude-haiku-4-5",
        message=Message(role="assistant", parts=Message.user(text).parts),
        usage=Usage(input_tokens=3, output_tokens=2),
    )


def test_each_step_gets_the_outcome_under_its_own_id_whatever_the_order() -> None:
    members = {"a-1": "step-a", "b-2": "step-b", "c-1": "step-c"}
    outcomes = {  # in another order than sent, one of them errored
        "c-1": BatchOutcome(custom_id="c-1", kind="succeeded", turn=reply("for c")),
        "b-2": BatchOutcome(custom_id="b-2", kind="errored", error="overloaded"),
        "a-1": BatchOutcome(custom_id="a-1", kind="succeeded", turn=reply("for a")),
    }
    routing = routed(members, BatchResults(outcomes=outcomes))
    step_a, step_c = routing.outcomes["step-a"], routing.outcomes["step-c"]
    assert step_a is not None and step_a.turn is not None and step_a.turn.text == "for a"
    assert step_c is not None and step_c.turn is not None and step_c.turn.text == "for c"
    assert routing.outcomes["step-b"] == outcomes["b-2"]
    assert routing.counts == {"succeeded": 2, "errored": 1, "unknown_ids": 0, "malformed_lines": 0}
    assert routing.rejected == {}


def test_unknown_unreadable_and_missing_lines_are_counted_never_routed() -> None:
    members = {"a-1": "step-a", "b-1": "step-b", "c-1": "step-c", "d-1": "step-d"}
    outcomes = {
        "a-1": BatchOutcome(custom_id="a-1", kind="expired"),
        # filed under b's id but naming another: not b's answer
        "b-1": BatchOutcome(custom_id="x-9", kind="succeeded", turn=reply("someone else's")),
        "c-1": BatchOutcome(custom_id="c-1", kind="succeeded"),  # no reply in it
        "old-1": BatchOutcome(custom_id="old-1", kind="succeeded", turn=reply("a cancelled step")),
    }
    results = BatchResults(
        outcomes=outcomes, unknown_ids=2, malformed_lines=1, missing_ids=("d-1",)
    )
    routing = routed(members, results)
    assert routing.outcomes == {
        "step-a": outcomes["a-1"],
        "step-b": None,
        "step-c": None,
        "step-d": None,
    }
    assert routing.counts == {"expired": 1, "missing": 3, "unknown_ids": 2, "malformed_lines": 1}
    assert routing.rejected == {"missing": 3, "unknown_ids": 2, "malformed_lines": 1}
