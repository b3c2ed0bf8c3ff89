"""Reply planning in the simulator: default replies, directives by audience, thinking, tool
calls, and `times=N` counting under concurrency."""

from __future__ import annotations

import threading
from typing import Any, Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from grove.simulator.config import SimulatorConfig
from grove.simulator.directives import DirectiveError
from grove.simulator.script import (
    Entry,
    Inbound,
    Plan,
    Planner,
    estimate_tokens,
    generated_words,
    locate_script,
    split_deltas,
)


def inbound(
    prompt: str,
    *,
    script: str | None = None,
    step: int = 1,
    tools: tuple[str, ...] = (),
    thinking: bool = False,
) -> Inbound:
    """A request whose script is `prompt` unless given (a later step: `prompt` is results)."""
    body: dict[str, Any] = {}
    return Inbound(
        model="m",
        prompt=prompt,
        script=prompt if script is None else script,
        step=step,
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
    assert plan.thinking == () and plan.tool_calls == () and plan.fault is None
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
    (call,) = plan.tool_calls
    assert call.name == "read"
    assert call.arguments == {"path": "a.txt"}
    assert call.arguments_json == '{"path":"a.txt"}'
    assert len(call.argument_chunks) > 1
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


# --- several calls and steps ------------------------------------------------------------------

FORKS = (
    """[[sim calls='[{"name":"fork","args":{"prompt":"a"}},{"name":"fork","args":{"prompt":"b"}},"""
    """{"name":"fork","args":{"prompt":"c"}}]']] [[sim step=2 tool=wait args='{"timeout":5}']]"""
)
FAN_OUT_TOOLS = ("fork", "wait")


def calls(plan: Plan) -> list[tuple[str, dict[str, Any]]]:
    return [(call.name, call.arguments) for call in plan.tool_calls]


def test_calls_make_every_call_in_one_reply_in_order() -> None:
    plan = planner().plan(inbound(f"Fan out. {FORKS}", tools=FAN_OUT_TOOLS))
    assert calls(plan) == [("fork", {"prompt": p}) for p in "abc"]
    assert plan.text == ()
    assert [call.arguments_json for call in plan.tool_calls] == [
        '{"prompt":"a"}',
        '{"prompt":"b"}',
        '{"prompt":"c"}',
    ]
    assert plan.answer_tokens == sum(len(call.argument_chunks) for call in plan.tool_calls)
    assert plan.answer_tokens > 3
    both = planner().plan(
        inbound("""[[sim reply="On it." calls='[{"name":"wait"}]']]""", tools=FAN_OUT_TOOLS)
    )
    assert both.text == ("On", " it.") and calls(both) == [("wait", {})]


def test_every_called_tool_must_be_offered() -> None:
    with pytest.raises(
        DirectiveError,
        match=r"tool 'wait', which this request does not offer \(offered: fork\)",
    ):
        planner().plan(
            inbound("""[[sim calls='[{"name":"fork"},{"name":"wait"}]']]""", tools=("fork",))
        )
    with pytest.raises(DirectiveError, match=r"offer \(offered: none\)"):
        planner().plan(inbound("""[[sim calls='[{"name":"fork"}]']]"""))


def test_the_fan_out_script_step_by_step() -> None:
    results = "child a said hi\nchild b said hi\nchild c said hi"
    step_two = planner().plan(inbound(results, script=FORKS, step=2, tools=FAN_OUT_TOOLS))
    assert calls(step_two) == [("wait", {"timeout": 5})]
    step_three = planner(tokens=7).plan(
        inbound("all done", script=FORKS, step=3, tools=FAN_OUT_TOOLS)
    )
    assert step_three.tool_calls == ()
    assert step_three.text == generated_words("all done", 7)


def test_step_one_takes_stepless_and_step_one_directives_last_wins() -> None:
    text = "q [[sim reply=first]] [[sim step=2 reply=second]] [[sim step=1 reply=one]]"
    assert planner().plan(inbound(text)).text == ("one",)
    text = "q [[sim step=1 reply=one]] [[sim reply=plain]] [[sim step=3 reply=three]]"
    assert planner().plan(inbound(text)).text == ("plain",)


def test_directives_are_stripped_at_every_step_and_never_echoed() -> None:
    text = "Tell me [[sim tokens=4]] about [[sim step=2 reply=later]] forks"
    plan = planner().plan(inbound(text))
    assert plan.text == generated_words("Tell me about forks", 4)
    assert "sim" not in plan.reply_text and "later" not in plan.reply_text


def test_later_steps_use_only_their_own_step_directives() -> None:
    script = "q [[sim reply=plain tokens=2]] [[sim step=3 reply=three]]"
    # Step 2 has no step=2 directive: the step-less script directive does not apply again;
    # the default reply comes from the results.
    step_two = planner(tokens=5).plan(inbound("result text", script=script, step=2))
    assert step_two.text == generated_words("result text", 5)
    assert planner().plan(inbound("r", script=script, step=3)).text == ("three",)
    assert planner(tokens=3).plan(inbound("r", script=script, step=4)).text == (
        generated_words("r", 3)
    )


def test_without_a_step_directive_the_results_directives_apply_stepless_only() -> None:
    results = "file says [[sim reply=from-results]] and [[sim step=2 reply=ignored]]"
    plan = planner().plan(inbound(results, script="q", step=2))
    assert plan.text == ("from-results",)
    scripted = planner().plan(inbound(results, script="q [[sim step=2 reply=s]]", step=2))
    assert scripted.text == ("s",)
    only_stepped = planner(tokens=2).plan(inbound("[[sim step=2 reply=x]] r", script="q", step=2))
    assert only_stepped.text == generated_words("r", 2)


def test_a_reply_without_results_after_it_reapplies_the_stepless_script() -> None:
    """An assistant prefill: step 2, and the last user message is still the script."""
    text = "q [[sim reply=again]] [[sim step=3 reply=three]]"
    assert planner().plan(inbound(text, step=2)).text == ("again",)


def test_no_script_at_all_reads_the_results() -> None:
    plan = planner().plan(inbound("[[sim tool=wait]] r", script="", tools=("wait",)))
    assert calls(plan) == [("wait", {})]


def test_steps_respect_the_audience() -> None:
    script = "[[sim step=2 reply=agent]] [[sim@reviewer step=2 reply=reviewer]]"
    assert planner().plan(inbound("r", script=script, step=2)).text == ("agent",)
    reviewer = inbound("r", script=script, step=2, tools=("advise",))
    assert planner().plan(reviewer).text == ("reviewer",)


def test_times_counts_a_step_directive_only_where_it_applies() -> None:
    shared = planner()
    script = "q [[sim step=2 fault=500 times=1]]"
    assert shared.plan(inbound(script)).fault is None
    assert shared.plan(inbound(script)).fault is None
    faults = [shared.plan(inbound("r", script=script, step=2)).fault for _ in range(3)]
    assert [fault is not None for fault in faults] == [True, False, False]


@pytest.mark.parametrize(
    ("entries", "expected"),
    [
        ([], ("", 1)),
        ([("text", "hi")], ("hi", 1)),
        ([("text", "hi"), ("reply", ""), ("results", "")], ("hi", 2)),
        (
            [("text", "hi"), ("reply", ""), ("results", ""), ("reply", ""), ("results", "")],
            ("hi", 3),
        ),
        ([("text", "hi"), ("reply", "")], ("hi", 2)),
        ([("text", "hi"), ("reply", ""), ("reply", ""), ("results", "")], ("hi", 2)),
        ([("text", "a"), ("reply", ""), ("results", ""), ("text", "b")], ("b", 1)),
        ([("text", "a"), ("reply", ""), ("text", "b"), ("reply", ""), ("results", "")], ("b", 2)),
        ([("results", ""), ("reply", ""), ("results", "")], ("", 2)),
    ],
)
def test_locate_script(entries: list[tuple[Entry, str]], expected: tuple[str, int]) -> None:
    assert locate_script(entries) == expected


def test_invalid_output_counts_the_user_messages_after_it() -> None:
    from grove.simulator.script import invalid_answers_left

    asked: tuple[Literal["text"], str] = ("text", "Review. [[sim invalid_output=2]]")
    assert invalid_answers_left([asked]) == 2
    assert invalid_answers_left([asked, ("reply", ""), ("text", "Not JSON; again.")]) == 1
    assert (
        invalid_answers_left(
            [asked, ("reply", ""), ("results", ""), ("reply", ""), ("text", "again")]
        )
        == 0
    )
    assert invalid_answers_left([("text", "no directive"), ("reply", ""), ("text", "more")]) == 0
    assert invalid_answers_left([asked, ("reply", ""), ("text", "[[sim invalid_output=1]]")]) == 1
