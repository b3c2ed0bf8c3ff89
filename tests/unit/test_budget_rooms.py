"""Tests of supervisor/budget.py's pure room arithmetic: how many reply tokens a request may
hold in a cost budget, at the rates its prompt's length brings (long-context tiers)."""

from __future__ import annotations

import pytest

from grove.providers.base import Usage
from grove.providers.pricing import cost_usd, reply_cost_usd
from grove.supervisor.budget import TreeSpend, output_room
from grove.supervisor.budget_rules import Budget


def test_a_reply_past_the_long_context_tier_costs_its_rate() -> None:
    # gpt-6-sol: output $10 per million, $15 once the prompt is past 272K tokens.
    assert reply_cost_usd("gpt-6-sol", 1_000_000, 272_000) == pytest.approx(10.0)
    assert reply_cost_usd("gpt-6-sol", 1_000_000, 272_001) == pytest.approx(15.0)
    assert reply_cost_usd("unknown-model", 1_000, 10) == 0.0


@pytest.mark.parametrize("prompt_tokens", [100_000, 300_000])
def test_the_output_room_of_a_cost_budget_is_priced_at_the_prompts_tier(
    prompt_tokens: int,
) -> None:
    budget = Budget(cost_usd=5.0)
    prompt = Usage(input_tokens=prompt_tokens)
    room = output_room(TreeSpend(started=0.0), budget, "gpt-6-sol", prompt)
    # The room filled is within the budget, and one more token would pass it.
    filled = Usage(input_tokens=prompt_tokens, output_tokens=int(room))
    assert cost_usd("gpt-6-sol", filled) <= 5.0
    over = Usage(input_tokens=prompt_tokens, output_tokens=int(room) + 2)
    assert cost_usd("gpt-6-sol", over) > 5.0


def test_a_request_on_the_batch_tier_holds_and_costs_at_its_half_price() -> None:
    assert reply_cost_usd("gpt-6-sol", 1_000_000, 1_000, "batch") == pytest.approx(5.0)
    budget = Budget(cost_usd=5.0)
    prompt = Usage(input_tokens=100_000)
    batch = output_room(TreeSpend(started=0.0), budget, "gpt-6-sol", prompt, "batch")
    twice = output_room(TreeSpend(started=0.0), Budget(cost_usd=10.0), "gpt-6-sol", prompt)
    assert batch == pytest.approx(twice, abs=1)  # at half the price, as twice the dollars
    filled = Usage(input_tokens=100_000, output_tokens=int(batch))
    assert cost_usd("gpt-6-sol", filled, tier="batch") <= 5.0 < cost_usd("gpt-6-sol", filled)
