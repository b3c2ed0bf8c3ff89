"""Tool results with images, as each wire carries them: Anthropic image blocks in the
tool_result, Responses `input_image` in the call's output, Chat Completions a user message
after the tool message (which takes text only), Gemini `inline_data` after the response.
"""

from __future__ import annotations

from typing import Any

from grove.actors.transcript import part_from_data, part_to_data
from grove.providers.anthropic.wire import AnthropicWire
from grove.providers.base import (
    ImageData,
    ImagePart,
    Message,
    Request,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from grove.providers.google.wire import GoogleWire
from grove.providers.http import Endpoint
from grove.providers.openai.chat import OpenAIChatWire
from grove.providers.openai.responses import OpenAIResponsesWire

ENDPOINT = Endpoint(base_url="http://127.0.0.1:1", api_key="test-key-not-real-0000")
PIXEL = ImageData(media_type="image/png", data="iVBORw0KGgo=")
RESULT = ToolResultPart(call_id="call_1", name="badge", content="a badge", images=(PIXEL,))


def body(wire: Any, model: str) -> dict[str, Any]:
    request = Request(
        model=model,
        messages=(
            Message(role="user", parts=(TextPart(text="draw"),)),
            Message(
                role="assistant",
                parts=(ToolCallPart(call_id="call_1", name="badge", arguments={}, signature=None),),
            ),
            Message(role="user", parts=(RESULT,)),
        ),
    )
    prepared: dict[str, Any] = wire.prepare(request, ENDPOINT).body
    return prepared


def test_anthropic_puts_image_blocks_in_the_tool_result() -> None:
    block = body(AnthropicWire(), "claude-haiku-4-5")["messages"][-1]["content"][0]
    assert block["content"] == [
        {"type": "text", "text": "a badge"},
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
        },
    ]


def test_responses_gives_the_output_an_input_image() -> None:
    items = body(OpenAIResponsesWire(), "gpt-5-mini")["input"]
    (output,) = [item for item in items if item.get("type") == "function_call_output"]
    assert output["output"] == [
        {"type": "input_text", "text": "a badge"},
        {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo="},
    ]


def test_chat_sends_the_images_in_a_user_message_after_the_tool_message() -> None:
    messages = body(OpenAIChatWire(), "gpt-5-mini")["messages"]
    tool, images = messages[-2:]
    assert tool == {"role": "tool", "tool_call_id": "call_1", "content": "a badge"}
    assert images["role"] == "user"
    assert images["content"][1] == {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="},
    }


def test_gemini_sends_inline_data_after_the_function_response() -> None:
    parts = body(GoogleWire(), "gemini-3.0-flash")["contents"][-1]["parts"]
    assert parts[0]["functionResponse"]["name"] == "badge"
    assert parts[1] == {"inline_data": {"mime_type": "image/png", "data": "iVBORw0KGgo="}}


def test_images_are_kept_in_the_stored_history() -> None:
    assert part_from_data(part_to_data(RESULT)) == RESULT


def user_images_body(wire: Any, model: str) -> dict[str, Any]:
    """A user message of text and an image (compacted history on a frame, say)."""
    parts = (TextPart(text="frames follow"), ImagePart(image=PIXEL))
    request = Request(model=model, messages=(Message(role="user", parts=parts),))
    prepared: dict[str, Any] = wire.prepare(request, ENDPOINT).body
    return prepared


def test_an_image_in_a_user_message_travels_in_each_wires_own_block() -> None:
    source = {"type": "base64", "media_type": "image/png", "data": PIXEL.data}
    anthropic = user_images_body(AnthropicWire(), "claude-haiku-4-5")["messages"][0]["content"]
    assert anthropic == [
        {"type": "text", "text": "frames follow"},
        {"type": "image", "source": source},
    ]
    responses = user_images_body(OpenAIResponsesWire(), "gpt-5-mini")["input"][0]["content"]
    assert responses[1] == {"type": "input_image", "image_url": PIXEL.data_url}
    chat = user_images_body(OpenAIChatWire(), "gpt-5-mini")["messages"]
    assert chat[-1] == {
        "role": "user",
        "content": [{"type": "image_url", "image_url": {"url": PIXEL.data_url}}],
    }
    gemini = user_images_body(GoogleWire(), "gemini-3.0-flash")["contents"][0]["parts"]
    assert gemini[1] == {"inline_data": {"mime_type": "image/png", "data": PIXEL.data}}
    stored = part_to_data(ImagePart(image=PIXEL))
    assert part_from_data(stored) == ImagePart(image=PIXEL)
