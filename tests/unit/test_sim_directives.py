"""`[[sim ...]]` directive parsing: the grammar, every validation rule, and fuzzing that shows
the parser raises nothing but `DirectiveError`."""

from __future__ import annotations

import json
import re
import string
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from grove.simulator.directives import (
    FAULT_KINDS,
    MAX_STEP,
    Directive,
    DirectiveError,
    ScriptedCall,
    parse_directives,
)


def only(text: str) -> Directive:
    parsed = parse_directives(text)
    assert len(parsed.directives) == 1
    return parsed.directives[0]


def test_plain_text_has_no_directives_and_is_kept_whole() -> None:
    parsed = parse_directives("hello [[simple]] [[simulate this]] world")
    assert parsed.text == "hello [[simple]] [[simulate this]] world"
    assert parsed.directives == ()


def test_every_key_is_read_with_its_type() -> None:
    directive = only(
        "[[sim reply=\"Hi there\" thinking='let me think' tokens=7 ttft_ms=12.5 tps=40 "
        "headers_ms=80 fault=429 retry_after=1.5 times=2]]"
    )
    assert directive.audience == "agent"
    assert directive.reply == "Hi there"
    assert directive.thinking == "let me think"
    assert directive.tokens == 7
    assert directive.ttft_ms == 12.5
    assert directive.headers_ms == 80.0
    assert directive.tps == 40.0
    assert directive.fault == "429"
    assert directive.retry_after == 1.5
    assert directive.times == 2
    assert directive.tool is None and directive.args is None


def test_tool_with_json_args_and_disconnect_after() -> None:
    directive = only(
        """[[sim tool=read args='{"path": "a b.txt", "n": [1, 2]}' fault=disconnect after=3]]"""
    )
    assert directive.tool == "read"
    assert directive.args == {"path": "a b.txt", "n": [1, 2]}
    assert directive.fault == "disconnect"
    assert directive.after == 3


def test_tool_without_args_gets_empty_arguments() -> None:
    assert only("[[sim tool=now]]").args == {}
    assert only("[[sim tool=now]]").scripted_calls == (ScriptedCall(name="now", args={}),)
    assert only("[[sim reply=x]]").scripted_calls == ()


def test_calls_are_read_in_order_with_optional_args() -> None:
    directive = only(
        """[[sim calls='[{"name": "fork", "args": {"prompt": "a b"}}, {"name": "fork", """
        """"args": {"prompt": "it\\'s"}}, {"name": "wait"}]' step=1]]"""
    )
    assert directive.tool is None and directive.args is None
    assert directive.calls == (
        ScriptedCall(name="fork", args={"prompt": "a b"}),
        ScriptedCall(name="fork", args={"prompt": "it's"}),
        ScriptedCall(name="wait", args={}),
    )
    assert directive.scripted_calls == directive.calls
    assert directive.step == 1


def test_step_is_read_and_defaults_to_none() -> None:
    assert only("[[sim step=3 tool=wait]]").step == 3
    assert only(f"[[sim step={MAX_STEP}]]").step == MAX_STEP
    assert only("[[sim tool=wait]]").step is None


def test_directives_are_stripped_and_source_is_exact() -> None:
    text = "before [[sim tokens=3]] middle [[sim@reviewer reply=ok]] after"
    parsed = parse_directives(text)
    assert parsed.text == "before  middle  after"
    assert [d.source for d in parsed.directives] == [
        "[[sim tokens=3]]",
        "[[sim@reviewer reply=ok]]",
    ]
    assert [d.audience for d in parsed.directives] == ["agent", "reviewer"]


def test_last_directive_for_an_audience_and_steps_wins() -> None:
    parsed = parse_directives(
        "[[sim tokens=1]] [[sim@reviewer tokens=2]] [[sim tokens=3]] [[sim step=2 tokens=4]] "
        "[[sim@reviewer step=1 tokens=5]] [[sim step=2 tokens=6]]"
    )
    every = {None, 1, 2}

    def tokens(directive: Directive | None) -> int | None:
        return None if directive is None else directive.tokens

    assert tokens(parsed.last("agent", every)) == 6
    assert tokens(parsed.last("agent", {None, 1})) == 3
    assert tokens(parsed.last("agent", {2})) == 6
    assert tokens(parsed.last("agent", {1})) is None
    assert tokens(parsed.last("reviewer", {None})) == 2
    assert tokens(parsed.last("reviewer", {None, 1})) == 5
    assert parse_directives("[[sim tokens=1]]").last("reviewer", every) is None


def test_quoted_values_keep_brackets_and_escaped_quotes() -> None:
    directive = only(r"""[[sim reply="say \"]]\" now" thinking='it\'s \d']]""")
    assert directive.reply == 'say "]]" now'
    assert directive.thinking == r"it's \d"


def test_empty_directive_and_newlines_between_pairs() -> None:
    assert only("[[sim]]") == Directive(source="[[sim]]", audience="agent")
    assert only("[[sim\n tokens=4\n]]").tokens == 4


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[[sim tokens=3", "never closed"),
        ("[[sim tokens=]]", "has no value"),
        ("[[sim colour=red]]", "unknown directive key 'colour'"),
        ("[[sim tokens=1 tokens=2]]", "given twice"),
        ("[[sim tokens=-1]]", "tokens must be a whole number"),
        ("[[sim tokens=1.5]]", "tokens must be a whole number"),
        ("[[sim tokens=100001]]", "tokens must be a whole number from 0 to 100000"),
        ("[[sim ttft_ms=soon]]", "ttft_ms must be a number"),
        ("[[sim fault=404]]", "fault must be one of"),
        ("[[sim retry_after=2]]", "retry_after needs fault=429"),
        ("[[sim fault=disconnect retry_after=2]]", "retry_after needs fault=429"),
        ("[[sim after=2]]", "after needs fault=disconnect"),
        ("[[sim times=2]]", "times needs a fault"),
        ("[[sim fault=500 times=0]]", "times must be 1 or more"),
        ("[[sim args='{}']]", "args needs tool=NAME"),
        ("[[sim tool=x args='[1]']]", "args must be a JSON object"),
        ("[[sim tool=x args='{nope}']]", "args is not valid JSON"),
        ("[[sim tool='two words']]", "tool must be a tool name"),
        ("""[[sim tool=x args='{"a": NaN}']]""", "args is not valid JSON (NaN is not JSON)"),
        ("[[sim tool=x args=" + "[" * 100_000 + "]]", "args is not valid JSON (nested too deeply)"),
        ("[[sim step=0]]", f"step must be a whole number from 1 to {MAX_STEP}; got '0'"),
        ("[[sim step=-1]]", "step must be a whole number from 1"),
        ("[[sim step=2.5]]", "step must be a whole number from 1"),
        (f"[[sim step={MAX_STEP + 1}]]", f"step must be a whole number from 1 to {MAX_STEP}"),
        ("""[[sim calls='[{"name": "a"}]' tool=b]]""", "calls cannot be combined with tool"),
        ("""[[sim tool=b args='{}' calls='[{"name": "a"}]']]""", "calls cannot be combined"),
        ("[[sim calls='[{nope}]']]", "calls is not valid JSON"),
        ("[[sim calls='[1, Infinity]']]", "calls is not valid JSON (Infinity is not JSON)"),
        ("[[sim calls='[]']]", "calls must be a non-empty JSON array"),
        ("""[[sim calls='{"name": "a"}']]""", "calls must be a non-empty JSON array"),
        ("""[[sim calls='[{"name": "a"}, 7]']]""", 'calls[1] must be a JSON object with "name"'),
        ("""[[sim calls='[{"args": {}}]']]""", 'calls[0] needs a "name"'),
        ("""[[sim calls='[{"name": "a b"}]']]""", "calls[0].name must be a tool name"),
        (
            """[[sim calls='[{"name": 5}]']]""",
            "calls[0].name must be a tool name (letters, digits, _ . : -); got 5",
        ),
        (
            """[[sim calls='[{"name": "a", "args": [1]}]']]""",
            "calls[0].args must be a JSON object; got [1]",
        ),
        (
            """[[sim calls='[{"name": "a", "arguments": {}}]']]""",
            "calls[0] has unknown key 'arguments'",
        ),
        ('[[sim reply="open]]', "has no closing"),
        ("[[sim reply='a'b]]", "must be followed by a space"),
        ("[[sim reply=a'b]]", "quote inside a bare word"),
        ("[[sim = 3]]", "expected KEY=VALUE"),
        ("[[sim tokens 3]]", "expected KEY=VALUE"),
        ("[[sim@boss tokens=3]]", "unknown directive audience '@boss'"),
        ("[[sim@reviewerx tokens=3]]", "unknown directive audience '@reviewerx'"),
        ("[[sim@reviewer:tokens=3]]", "must be followed by a space"),
    ],
)
def test_malformed_directives_are_refused_precisely(text: str, message: str) -> None:
    with pytest.raises(DirectiveError, match=re.escape(message)):
        parse_directives(f"some words {text}")


# --- fuzzing ------------------------------------------------------------------------------

DIRECTIVE_ALPHABET = string.ascii_letters + string.digits + " =\"'[]@\\{}:,.\n_-"


@given(st.text())
def test_any_text_parses_or_raises_only_directive_error(text: str) -> None:
    try:
        parsed = parse_directives(text)
    except DirectiveError:
        return
    if "[[sim" not in text:
        assert parsed.text == text and parsed.directives == ()


@given(st.text(alphabet=DIRECTIVE_ALPHABET, max_size=60))
def test_directive_shaped_text_parses_or_raises_only_directive_error(body: str) -> None:
    text = f"x [[sim{body}]] y [[sim@reviewer {body}"
    try:
        parsed = parse_directives(text)
    except DirectiveError:
        return
    for directive in parsed.directives:
        assert directive.source in text
        assert directive.source.startswith("[[sim") and directive.source.endswith("]]")


def quoted(value: str) -> str:
    """The encoding a test author writes: double quotes, with inner double quotes escaped."""
    return '"' + value.replace('"', '\\"') + '"'


values = st.text(alphabet=st.characters(codec="utf-8"), max_size=40).filter(
    lambda value: not value.endswith("\\")
)


@given(
    reply=values,
    thinking=values,
    tokens=st.integers(min_value=0, max_value=100_000),
    fault=st.sampled_from(FAULT_KINDS),
    times=st.integers(min_value=1, max_value=1000),
    args=st.dictionaries(st.text(max_size=8), st.integers() | st.text(max_size=8), max_size=4),
    step=st.integers(min_value=1, max_value=MAX_STEP),
    prefix=st.text(max_size=20).filter(lambda text: "[[sim" not in text),
)
def test_written_directives_read_back_exactly(
    reply: str,
    thinking: str,
    tokens: int,
    fault: str,
    times: int,
    args: dict[str, object],
    step: int,
    prefix: str,
) -> None:
    source = (
        f"[[sim reply={quoted(reply)} thinking={quoted(thinking)} tokens={tokens} "
        f"fault={fault} times={times} tool=lookup args={quoted(json.dumps(args))} step={step}]]"
    )
    parsed = parse_directives(prefix + source + " tail")
    assert parsed.text == prefix + " tail"
    directive = parsed.directives[0]
    assert directive.source == source
    assert (directive.reply, directive.thinking, directive.tokens) == (reply, thinking, tokens)
    assert (directive.fault, directive.times, directive.args) == (fault, times, args)
    assert directive.step == step


TOOL_NAME_ALPHABET = string.ascii_letters + string.digits + "_.:-"
tool_names = st.text(alphabet=TOOL_NAME_ALPHABET, min_size=1, max_size=12)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=12,
)
call_lists = st.lists(
    st.tuples(tool_names, st.dictionaries(st.text(max_size=8), json_values, max_size=3)),
    min_size=1,
    max_size=5,
)


@given(calls=call_lists, step=st.integers(min_value=1, max_value=MAX_STEP), bare=st.booleans())
def test_written_calls_and_step_read_back_exactly(
    calls: list[tuple[str, dict[str, object]]], step: int, bare: bool
) -> None:
    """Any call list a test author writes (args left out when empty and `bare`) reads back."""
    written = [
        {"name": name} if bare and not args else {"name": name, "args": args}
        for name, args in calls
    ]
    source = f"[[sim step={step} calls={quoted(json.dumps(written, ensure_ascii=False))}]]"
    parsed = parse_directives("go " + source)
    assert parsed.text == "go "
    directive = parsed.directives[0]
    assert directive.source == source and directive.step == step
    assert [(call.name, call.args) for call in directive.scripted_calls] == calls


call_shaped = st.lists(
    st.dictionaries(st.sampled_from(["name", "args", "extra"]), tool_names | json_values)
    | json_values,
    max_size=4,
)


@given(json_values | call_shaped)
def test_any_json_as_calls_parses_or_raises_only_directive_error(value: Any) -> None:
    try:
        directive = only(f"[[sim calls={quoted(json.dumps(value))}]]")
    except DirectiveError:
        return
    assert isinstance(value, list) and value
    assert [(call.name, call.args) for call in directive.scripted_calls] == [
        (item["name"], item.get("args", {})) for item in value
    ]


def test_model_key_addresses_one_model_among_several() -> None:
    directed = parse_directives(
        "[[sim@reviewer model=gpt-5-nano reply=one]] [[sim@reviewer model=claude-haiku-4-5 "
        "reply=two]] [[sim@reviewer reply=anyone]] text"
    )
    assert directed.last("reviewer", {None}, "gpt-5-nano") is not None
    by_model = {
        model: directed.last("reviewer", {None}, model).reply  # type: ignore[union-attr]
        for model in ("gpt-5-nano", "claude-haiku-4-5", "gemini-3.0-flash")
    }
    assert by_model == {
        "gpt-5-nano": "anyone",
        "claude-haiku-4-5": "anyone",
        "gemini-3.0-flash": "anyone",
    }
    scoped = parse_directives(
        "[[sim@reviewer model=gpt-5-nano reply=one]] [[sim@reviewer model=claude-haiku-4-5 "
        "reply=two]] text"
    )
    assert scoped.last("reviewer", {None}, "gpt-5-nano").reply == "one"  # type: ignore[union-attr]
    assert scoped.last("reviewer", {None}, "claude-haiku-4-5").reply == "two"  # type: ignore[union-attr]
    assert scoped.last("reviewer", {None}, "gemini-3.0-flash") is None
