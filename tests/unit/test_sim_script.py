"""Reply planning in the simulator: default replies, directives by audience, thinking, tool
calls, and `times=N` counting under concurrency."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from providers.simulator.config import SimulatorConfig
from providers.simulator.directives import DirectiveError
from providers.simulator.script import (
    Inbound,
    Planner,
    estimate_tokens,
    generated_words,
    split_deltas,
)


def inbound(prompt: str, *, tools: tuple[str, ...] = (), thinking: bool = False) -> Inbound:
    body: dict[str, Any] = {}
    return Inbound(
        model="m",
        prompt=prompt,
        offered_tools=frozenset(tools),
        thinking=thinking,
        stream=True,
        input_tokens=1,
        body=body,
    )


def planner(**settings: Any) -> Planner:
    return Planner(SimulatorConfig(**settings))


def test_generated_words_are_a_deterministic_sentence_of_the_asked_length() -> None:
    words = generated_words("what is a fork?", 9)
    assert words == generated_words("what is a fork?", 9)
    assert len(words) == 9
    sentence = "".join(words)
    assert sentence[0].isupper() and sentence.endswith(".")
    assert len(sentence.split()) == 9
    assert generated_words("another question", 9) != words
    assert generated_words("x", 0) == ()


@given(st.text())
def test_split_deltas_rejoins_exactly_with_one_word_each(text: str) -> None:
    deltas = split_deltas(text)
    assert "".join(deltas) == text
    assert all(len(delta.split()) <= 1 for delta in deltas)
    assert len(deltas) == max(len(text.split()), 1 if text else 0)


def test_default_reply_comes_from_the_text_without_its_directive() -> None:
    plan = planner(tokens=24).plan(inbound("tell me [[sim tokens=5]] about forks"))
    assert plan.text == generated_words("tell me about forks", 5)
    assert plan.thinking == () and plan.tool_call is None and plan.fault is None
    assert planner(tokens=24).plan(inbound("tell me about forks")).text == generated_words(
        "tell me about forks", 24
    )


def test_reply_and_thinking_directives_and_pacing_overrides() -> None:
    plan = planner(ttft_ms=5, tps=10).plan(
        inbound(
            '[[sim reply="Hello there, you." thinking="Hmm, ok" ttft_ms=250]] hi', thinking=True
        )
    )
    assert plan.text == ("Hello", " there,", " you.")
    assert plan.thinking == ("Hmm,", " ok")
    assert plan.ttft_s == 0.25 and plan.tps == 10
    assert plan.content_events == 5
    assert (
        plan.signature
        and plan.signature
        == planner().plan(inbound('[[sim thinking="Hmm, ok"]]', thinking=True)).signature
    )


def test_thinking_is_streamed_only_when_the_request_asks_for_it() -> None:
    assert planner().plan(inbound('[[sim thinking="deep"]] q')).thinking == ()
    default = planner(tokens=4).plan(inbound("q", thinking=True))
    assert len(default.thinking) == 4 and default.thinking != default.text


def test_tool_call_directive_needs_the_tool_to_be_offered() -> None:
    plan = planner().plan(
        inbound("""[[sim tool=read args='{"path": "a.txt"}']]""", tools=("read",))
    )
    assert plan.tool_call is not None
    assert plan.tool_call.name == "read"
    assert plan.tool_call.arguments == {"path": "a.txt"}
    assert plan.tool_call.arguments_json == '{"path":"a.txt"}'
    assert len(plan.tool_call.argument_chunks) > 1
    assert plan.text == ()
    with pytest.raises(DirectiveError, match="tool 'read', which this request does not offer"):
        planner().plan(inbound("[[sim tool=read]]", tools=("write",)))


def test_reviewer_directives_apply_only_to_requests_offering_advise() -> None:
    text = "[[sim reply=agent]] [[sim@reviewer reply=reviewer]]"
    assert planner().plan(inbound(text)).text == ("agent",)
    assert planner().plan(inbound(text, tools=("advise", "read"))).text == ("reviewer",)
    only_agent = planner(tokens=3).plan(inbound("[[sim reply=agent]] x", tools=("advise",)))
    assert only_agent.text == generated_words("x", 3)


def test_times_counts_requests_per_exact_directive_text() -> None:
    shared = planner()
    first = [shared.plan(inbound("[[sim fault=500 times=2]] a")).fault for _ in range(4)]
    assert [fault is not None for fault in first] == [True, True, False, False]
    other_text = shared.plan(inbound("[[sim fault=500  times=2]] a")).fault
    assert other_text is not None  # a different directive string has its own count
    always = [shared.plan(inbound("[[sim fault=529]]")).fault for _ in range(3)]
    assert all(fault is not None and fault.kind == "529" for fault in always)


def test_times_counting_is_exact_across_threads() -> None:
    shared = planner()
    hits: list[bool] = []
    lock = threading.Lock()

    def worker() -> None:
        for _ in range(50):
            fault = shared.plan(inbound("[[sim fault=429 retry_after=1 times=120]]")).fault
            with lock:
                hits.append(fault is not None)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(hits) == 400
    assert sum(hits) == 120


def test_disconnect_fault_carries_after_and_retry_after_is_kept() -> None:
    fault = planner().plan(inbound("[[sim fault=disconnect after=3]]")).fault
    assert fault is not None and (fault.kind, fault.after) == ("disconnect", 3)
    fault = planner().plan(inbound("[[sim fault=429 retry_after=0.5]]")).fault
    assert fault is not None and fault.retry_after == 0.5


def test_estimate_tokens_counts_every_string() -> None:
    assert estimate_tokens({"a": "x" * 40, "b": ["y" * 8, {"c": "z" * 4}], "n": 5}) == 13
    assert estimate_tokens({}) == 1
