"""Which thinking a request on a model with preserved thinking still sends back: the pure
functions of providers/preserved_thinking.py, and what a stored part keeps of its binding.
"""

from __future__ import annotations

from dataclasses import replace

from grove.actors.transcript import part_from_data, part_to_data
from grove.providers.base import (
    AssistantTurn,
    Message,
    OutputSchema,
    Request,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
    Usage,
)
from grove.providers.errors import ProviderHTTPError
from grove.providers.preserved_thinking import bound, preserves_thinking, stamped, unbound
from grove.simulator.anthropic.thinking_blocks import bound_text

MODEL = "claude-sonnet-5-5"
TOOLS = (ToolSpec(name="now", description="The time.", parameters={"type": "object"}),)


def reply(request: Request, text: str, model: str = MODEL) -> Message:
    """The model's reply to `request`, its thinking bound as the provider binds it."""
    _, prefix = bound("anthropic", request)
    thinking = ThinkingPart(text="", signature=f"sig-{text}", provider="anthropic")
    message = Message(role="assistant", parts=(thinking, TextPart(text=text)))
    turn = AssistantTurn(provider="anthropic", model=model, message=message, usage=Usage())
    return stamped(turn, prefix).message


def conversation(system: str = "Be brief.") -> list[Message]:
    """Two questions and their answers, each answer's thinking bound to what came before."""
    messages = [Message.user("one")]
    first = Request(model=MODEL, messages=tuple(messages), system=system, tools=TOOLS)
    messages += [reply(first, "1"), Message.user("two")]
    second = replace(first, messages=tuple(messages))
    return [*messages, reply(second, "2"), Message.user("three")]


def kept_signatures(request: Request) -> list[str | None]:
    sent, _ = bound("anthropic", request)
    return [
        part.signature
        for message in sent.messages
        for part in message.parts
        if isinstance(part, ThinkingPart)
    ]


def test_models_that_preserve_thinking() -> None:
    assert preserves_thinking("claude-sonnet-5-5") and preserves_thinking("claude-opus-5-5")
    assert preserves_thinking("claude-fable-5-2")
    assert not preserves_thinking("claude-sonnet-4-5") and not preserves_thinking("gpt-6")


def test_a_conversation_that_only_grew_keeps_every_block() -> None:
    request = Request(model=MODEL, messages=tuple(conversation()), system="Be brief.", tools=TOOLS)
    assert kept_signatures(request) == ["sig-1", "sig-2"]


def test_a_changed_prefix_or_model_leaves_out_the_blocks_it_invalidated() -> None:
    messages = tuple(conversation())
    same = Request(model=MODEL, messages=messages, system="Be brief.", tools=TOOLS)
    assert kept_signatures(replace(same, system="Be thorough.")) == []
    assert kept_signatures(replace(same, tools=())) == []
    assert kept_signatures(replace(same, model="claude-opus-5-5")) == []
    edited = (Message.user("ONE"), *messages[1:])
    assert kept_signatures(replace(same, messages=edited)) == []
    # A block left out changes the prefix of every later one: they go too.
    first_answer = replace(messages[1], parts=messages[1].parts[1:])
    assert kept_signatures(replace(same, messages=(messages[0], first_answer, *messages[2:]))) == []
    # What came after the second question's answer does not touch the first answer's block.
    later = (*messages[:3], Message(role="assistant", parts=(TextPart(text="edited"),)))
    assert kept_signatures(replace(same, messages=(*later, messages[4]))) == ["sig-1"]


def test_other_models_send_their_conversation_unchanged() -> None:
    request = Request(model="claude-sonnet-4-5", messages=tuple(conversation()), system="x")
    assert bound("anthropic", request) == (request, None)


def test_a_bound_block_survives_the_store() -> None:
    (thinking, _) = conversation()[1].parts
    assert isinstance(thinking, ThinkingPart) and thinking.prefix and thinking.model == MODEL
    assert part_from_data(part_to_data(thinking)) == thinking


def test_a_refusal_naming_a_block_leaves_out_it_and_every_later_block() -> None:
    request = Request(model=MODEL, messages=tuple(conversation()), system="Be brief.", tools=TOOLS)
    message = bound_text("messages.3.content.0")
    error = ProviderHTTPError(message, provider="anthropic", status=400, body=message)
    again = unbound(request, error)
    assert again is not None
    sent, where = again
    assert where == "messages.3.content.0"
    assert kept_signatures(sent) == ["sig-1"]
    other = ProviderHTTPError("prompt is too long", provider="anthropic", status=400, body="")
    assert unbound(request, other) is None


def test_a_tool_loop_that_loses_its_leading_thinking_is_told_as_text() -> None:
    """A request that answers a call whose reply's thinking it must leave out (here: fewer
    tools than the reply was made with): the call and its result go as text, so no tool loop
    is left to need a leading thinking block."""
    ask = Request(model=MODEL, messages=(Message.user("time?"),), system="S", tools=TOOLS)
    _, prefix = bound("anthropic", ask)
    assert prefix is not None
    thinking = ThinkingPart(
        text="", signature="s", provider="anthropic", model=MODEL, prefix=prefix.digest
    )
    call = ToolCallPart(call_id="c1", name="now", arguments={"zone": "UTC"})
    result = ToolResultPart(call_id="c1", name="now", content="noon")
    loop = (
        Message.user("time?"),
        Message(role="assistant", parts=(thinking, call)),
        Message(role="user", parts=(result, TextPart(text="go on"))),
    )
    same, _ = bound("anthropic", replace(ask, messages=loop))
    assert same.messages == loop
    fewer, prefix = bound("anthropic", replace(ask, messages=loop, tools=()))
    assert [m.parts for m in fewer.messages[1:]] == [
        (TextPart(text='[called now {"zone": "UTC"}]'),),
        (TextPart(text="[now returned] noon"), TextPart(text="go on")),
    ]
    assert bound("anthropic", fewer) == (fewer, prefix)


def test_a_typed_answer_asked_natively_changes_no_prefix() -> None:
    """`output_config.format` (Claude 5.5's typed answers) is no part of a prefix: the
    earlier thinking still goes; asked through a tool, it adds that tool, and none goes."""
    typed = OutputSchema(
        name="answer",
        schema={
            "type": "object",
            "properties": {"n": {"type": "integer"}},
            "required": ["n"],
            "additionalProperties": False,
        },
    )
    request = Request(model=MODEL, messages=tuple(conversation()), system="Be brief.", tools=TOOLS)
    assert kept_signatures(replace(request, output=typed)) == ["sig-1", "sig-2"]
    by_tool = replace(typed, schema={"type": "object", "patternProperties": {"^x": {}}})
    assert kept_signatures(replace(request, output=by_tool)) == []
