"""A step's name on the batch tier (actors/agent/batched.py): the same when a turn cut off
resumes with the same conversation, another for any other step; and a batched reply shown to
watchers as a streamed one is."""

from __future__ import annotations

from grove.actors.agent.batched import STEP_KEY_CHARS, shown, step_key
from grove.providers.base import (
    AssistantTurn,
    Message,
    Request,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from grove.providers.stream_events import TextDelta, ThinkingDelta

CALL = ToolCallPart(call_id="call-1", name="shout", arguments={"text": "hi"})


def request(*messages: Message) -> Request:
    return Request(model="claude-haiku-4-5", messages=messages, tier="batch")


def results(*call_ids: str) -> Message:
    parts = tuple(ToolResultPart(call_id=c, name="shout", content="HI!") for c in call_ids)
    return Message(role="user", parts=parts)


def test_a_step_has_the_same_name_when_asked_again_and_no_other_step_has_it() -> None:
    first = request(Message.user("go"))
    called = Message(role="assistant", parts=(CALL,))
    second = request(Message.user("go"), called, results("call-1"))
    assert step_key("agent-a", first) == step_key("agent-a", request(Message.user("go")))
    names = {
        step_key("agent-a", first),
        step_key("agent-b", first),  # another agent
        step_key("agent-a", second),  # the next step
        step_key("agent-a", request(Message.user("go"), called, results("call-2"))),
        step_key("agent-a", request(Message.user("go on"))),  # another prompt, as long
    }
    assert len(names) == 5
    assert all(len(name) == STEP_KEY_CHARS and name.isalnum() for name in names)


def test_a_batched_reply_is_shown_as_its_thinking_and_text() -> None:
    turn = AssistantTurn(
        provider="anthropic",
        model="claude-haiku-4-5",
        message=Message(
            role="assistant",
            parts=(ThinkingPart(text="hmm"), TextPart(text="Loud."), CALL, TextPart(text="")),
        ),
        usage=Usage(input_tokens=5, output_tokens=3),
    )
    assert shown(turn) == [ThinkingDelta(index=0, text="hmm"), TextDelta(index=1, text="Loud.")]
