"""Where Grove puts Anthropic `cache_control` breakpoints: never more than four, none below the
model's minimum, the tail, the fork points, tools + system, the previous tail past the API's
20-block look-back; `[cache] ttl`; none at all without caching.

Pure functions, called directly on request bodies.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from grove.providers.anthropic.cache import LOOKBACK_BLOCKS, MAX_BREAKPOINTS
from grove.providers.anthropic.request import request_body
from grove.providers.base import (
    CachePoint,
    CachePolicy,
    JSONObject,
    Message,
    Request,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
)

MODEL = "claude-sonnet-4-5"  # caches from 1,024 tokens
HAIKU = "claude-haiku-4-5"  # from 4,096
CONTEXT = "shared context " * 1_000  # about 3,750 tokens
TOOL = ToolSpec(name="lookup", description="Look a key up. " * 400, parameters={"type": "object"})


def body(*messages: Message, model: str = MODEL, **fields: Any) -> JSONObject:
    fields.setdefault("cache", CachePolicy())
    built, _ = request_body(Request(model=model, messages=messages, **fields))
    return built


def marked(built: JSONObject) -> list[str]:
    """Where the breakpoints are: `tool:NAME`, `system`, `role:TEXT-START` per block."""
    found = [f"tool:{tool['name']}" for tool in built.get("tools", []) if "cache_control" in tool]
    system = built.get("system")
    if isinstance(system, list):
        found += ["system" for block in system if "cache_control" in block]
    for message in built["messages"]:
        for block in message["content"]:
            if "cache_control" in block:
                label = block.get("text") or block.get("content") or block.get("name") or "?"
                found.append(f"{message['role']}:{str(label)[:8]}")
    return found


def child(prompt: str, point: str = "root:2") -> tuple[Message, ...]:
    """A forked child's first request: the shared context, the fork point, its own task."""
    return (
        Message(role="user", parts=(TextPart(text=CONTEXT),)),
        Message(role="assistant", parts=(TextPart(text="Understood."),)),
        Message(role="user", parts=(CachePoint(key=point), TextPart(text=prompt))),
    )


def test_a_child_marks_its_fork_point_its_tail_and_its_system() -> None:
    built = body(*child("Task one"), system="You review code. " * 300)
    assert marked(built) == ["system", "assistant:Understo", "user:Task one"]
    assert built["system"][0]["cache_control"] == {"type": "ephemeral"}


def test_siblings_send_the_same_bytes_up_to_their_fork_point() -> None:
    first, second = body(*child("Task one")), body(*child("A different task"))

    def up_to_fork(built: JSONObject) -> str:
        text = json.dumps(built)
        return text[: text.index('"Understood.", "cache_control"')]

    assert up_to_fork(first) == up_to_fork(second)
    assert first["messages"][:2] == second["messages"][:2]


def test_no_breakpoint_below_the_models_minimum() -> None:
    short = (Message.user("Hi"),)
    assert marked(body(*short)) == []
    assert len(marked(body(*child("task")))) == 2  # 3,750 tokens: Sonnet caches them
    assert marked(body(*child("task"), model=HAIKU)) == []  # Haiku 4.5 wants 4,096


def test_without_caching_no_breakpoint_and_no_mark_is_sent() -> None:
    built = body(*child("task"), system="s " * 3_000, cache=None)
    assert marked(built) == []
    assert "__grove" not in json.dumps(built)
    assert isinstance(built["system"], str)


def test_an_hour_long_ttl_is_asked_for_when_configured() -> None:
    built = body(*child("task"), cache=CachePolicy(ttl="1h"))
    blocks = [block for message in built["messages"] for block in message["content"]]
    controls = [block["cache_control"] for block in blocks if "cache_control" in block]
    assert controls == [{"type": "ephemeral", "ttl": "1h"}] * 2


def test_tools_are_cached_with_their_last_definition_when_there_is_no_system() -> None:
    second = ToolSpec(name="b", description="x", parameters={})
    assert marked(body(Message.user("Hi " * 10), tools=(TOOL, second))) == [
        "tool:b",
        "user:Hi Hi Hi",
    ]


def tool_loop(steps: int, calls_per_step: int) -> tuple[Message, ...]:
    messages: list[Message] = [Message.user(CONTEXT)]
    for step in range(steps):
        calls = tuple(
            ToolCallPart(call_id=f"c{step}-{n}", name="lookup", arguments={"key": n})
            for n in range(calls_per_step)
        )
        results = tuple(
            ToolResultPart(call_id=call.call_id, name="lookup", content=f"value {step}")
            for call in calls
        )
        messages += [Message(role="assistant", parts=calls), Message(role="user", parts=results)]
    return tuple(messages)


def test_the_previous_tail_is_marked_when_the_look_back_cannot_reach_it() -> None:
    near = body(*tool_loop(2, 3))  # six blocks from the previous tail: the look-back finds it
    assert len(marked(near)) == 1
    far = body(*tool_loop(2, LOOKBACK_BLOCKS))  # forty blocks: it needs its own breakpoint
    assert len(marked(far)) == 2
    previous_tail = far["messages"][-3]["content"][-1]
    assert "cache_control" in previous_tail


def deep_child() -> tuple[Message, ...]:
    """A great-grandchild: three fork points in its history, and a system and tools."""
    return (
        Message(role="user", parts=(TextPart(text=CONTEXT), CachePoint(key="a:1"))),
        Message(role="assistant", parts=(TextPart(text="one " * 50), CachePoint(key="b:2"))),
        Message(role="user", parts=(TextPart(text="two " * 50), CachePoint(key="c:3"))),
        Message(role="assistant", parts=(TextPart(text="three " * 50),)),
        Message(role="user", parts=(TextPart(text="task"),)),
    )


def test_never_more_than_four_breakpoints_and_the_nearest_fork_point_wins() -> None:
    built = body(*deep_child(), system="rules " * 1_000, tools=(TOOL,))
    assert marked(built) == ["system", "assistant:one one ", "user:two two ", "user:task"]


@given(
    texts=st.lists(st.text(min_size=0, max_size=3_000), min_size=1, max_size=12),
    points=st.lists(st.booleans(), min_size=12, max_size=12),
    system=st.booleans(),
)
def test_any_conversation_gets_at_most_four_breakpoints(
    texts: list[str], points: list[bool], system: bool
) -> None:
    messages = []
    for index, text in enumerate(texts):
        parts: tuple[Any, ...] = (TextPart(text=text),)
        if points[index]:
            parts += (CachePoint(key=f"k{index}"),)
        messages.append(Message(role="user" if index % 2 == 0 else "assistant", parts=parts))
    if messages[-1].role != "user":
        messages.append(Message.user("go"))
    built = body(*messages, system="s " * 2_000 if system else None)
    text = json.dumps(built)
    assert text.count('"cache_control"') <= MAX_BREAKPOINTS
    assert "__grove" not in text
