"""The supervisor's bills of turns in flight: a request's estimate, told before it is sent, is
kept as spent when its turn is lost before the request's own bill came, and only then.
"""

from __future__ import annotations

from dataclasses import replace

from grove.actors.agent.estimates import ESTIMATED, UNBILLED, estimated_bill, is_bill
from grove.providers.base import Message, Request, TextPart
from grove.providers.catalog import model_info
from grove.providers.thinking import DEFAULT_MAX_TOKENS
from grove.supervisor.billing import InFlightBilling
from grove.supervisor.budget import Hold


def estimate(tokens: int) -> dict[str, object]:
    return {"usage": {"input_tokens": tokens, "output_tokens": 100}, ESTIMATED: True}


def test_a_request_sent_and_not_heard_of_is_kept_at_its_estimate() -> None:
    billing = InFlightBilling()
    billing.seen("t", "a", estimate(10))
    billing.seen("t", "a", {"cost_usd": 1.0})  # its bill replaces the estimate
    billing.seen("t", "a", estimate(20))  # the next request, sent as the host dies
    assert [m.data for m in billing.lost("t")] == [{"cost_usd": 1.0}, estimate(20)]
    assert billing.lost("t") == []  # counted once


def test_an_estimate_goes_once_the_reply_is_stored_as_a_step_or_the_turn_is_stored() -> None:
    billing = InFlightBilling()
    billing.seen("t", "a", estimate(10))
    billing.step_stored("t", {"cost_usd": 1.0})
    billing.seen("u", "b", estimate(10))
    billing.stored("u")
    assert billing.lost("t") == [] and billing.lost("u") == []


def test_an_attempt_that_failed_unbilled_is_not_kept_until_it_is_sent_again() -> None:
    billing = InFlightBilling()
    billing.seen("t", "a", estimate(10))
    billing.seen("t", "a", {UNBILLED: True})  # a 429: its host waits to send it again
    assert billing.lost("t") == []
    billing.seen("u", "a", estimate(10))
    billing.seen("u", "a", {UNBILLED: True})
    billing.seen("u", "a", estimate(10))  # sent again as the host dies
    assert [m.data for m in billing.lost("u")] == [estimate(10)]
    assert not is_bill(estimate(10)) and not is_bill({UNBILLED: True})
    assert is_bill({"cost_usd": 1.0})


def test_a_request_that_failed_unbilled_is_replaced_by_the_next() -> None:
    billing = InFlightBilling()
    billing.seen("t", "a", estimate(10))  # answered with an error: no bill comes
    billing.seen("t", "a", estimate(30))  # asked again
    assert [m.data for m in billing.lost("t")] == [estimate(30)]


def test_an_estimate_holds_the_reply_a_budget_holds_else_the_longest_it_may_get() -> None:
    request = Request(
        model="claude-haiku-4-5", messages=(Message(role="user", parts=(TextPart(text="hi"),)),)
    )
    unheld = estimated_bill(request, "anthropic", 12, None)
    assert unheld["usage"]["input_tokens"] == 12
    assert unheld["usage"]["output_tokens"] == DEFAULT_MAX_TOKENS  # the cap its wire sends
    openai = replace(request, model="gpt-5-mini")
    longest = model_info("gpt-5-mini").max_output_tokens  # no cap sent: the model's longest
    assert estimated_bill(openai, "openai", 12, None)["usage"]["output_tokens"] == longest
    assert unheld[ESTIMATED] is True and unheld["cost_usd"] > 0
    capped = estimated_bill(replace(request, max_tokens=50), "anthropic", 12, None)
    assert capped["usage"]["output_tokens"] == 50
    held = estimated_bill(request, "anthropic", 12, Hold(tokens=512, cost_usd=0.25, output=500))
    assert (held["usage"]["output_tokens"], held["cost_usd"]) == (500, 0.25)
    nothing_held = estimated_bill(request, "anthropic", 12, Hold())  # a tree without a budget
    assert nothing_held["usage"] == unheld["usage"]
