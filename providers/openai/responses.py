"""The OpenAI Responses wire (`POST /v1/responses`, SSE): request bodies and the `Wire`.

Stream events are read in responses_stream; error bodies in errors.py. Grove keeps
the conversation itself: every request is stateless (`store: false`) and carries it all.
"""

from __future__ import annotations

import json

from grove.providers.base import (
    CachePoint,
    ImagePart,
    JSONObject,
    Message,
    Request,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
)
from grove.providers.openai import PROVIDER
from grove.providers.openai.responses_stream import ResponsesParser
from grove.providers.openai.wire import OpenAIWire, strict_format
from grove.providers.thinking import openai_reasoning

ENCRYPTED_REASONING = "reasoning.encrypted_content"


class OpenAIResponsesWire(OpenAIWire):
    """The default OpenAI wire: the Responses API."""

    route = "responses"

    def build(self, request: Request) -> JSONObject:
        return request_body(request)

    def new_parser(self) -> ResponsesParser:
        return ResponsesParser()


def request_body(request: Request) -> JSONObject:
    """The JSON body. With reasoning on, encrypted reasoning is asked for, to be sent back."""
    body: JSONObject = {
        "model": request.model,
        "input": input_items(request.messages),
        "stream": True,
        "store": False,
    }
    if request.system:
        body["instructions"] = request.system
    if request.tools:
        body["tools"] = [tool_definition(tool) for tool in request.tools]
    if request.max_tokens is not None:
        body["max_output_tokens"] = request.max_tokens
    if request.output is not None:
        body["text"] = {"format": {"type": "json_schema", **strict_format(request.output)}}
    reasoning = openai_reasoning(request.model, request.thinking)
    if reasoning is not None:
        body["reasoning"] = reasoning
        if reasoning.get("effort") != "none":
            body["include"] = [ENCRYPTED_REASONING]
    if request.tier == "flex":
        body["service_tier"] = "flex"  # batch prices on this endpoint, slower (SPEC 20)
    return body


def tool_definition(tool: ToolSpec) -> JSONObject:
    # `strict` defaults to true on this API, which rejects most hand-written schemas.
    return {
        "type": "function",
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.parameters,
        "strict": False,
    }


def input_items(messages: tuple[Message, ...]) -> list[JSONObject]:
    """Grove messages as Responses input items, in order. Consecutive text parts of one
    message share a message item; calls, results and reasoning are items of their own."""
    items: list[JSONObject] = []
    for message in messages:
        texts: list[JSONObject] = []
        text_type = "input_text" if message.role == "user" else "output_text"
        for part in message.parts:
            if isinstance(part, TextPart):
                texts.append({"type": text_type, "text": part.text})
                continue
            if isinstance(part, ImagePart):
                texts.append({"type": "input_image", "image_url": part.image.data_url})
                continue
            if isinstance(part, CachePoint):
                continue
            if texts:
                items.append(_message_item(message.role, texts))
                texts = []
            item = _part_item(part)
            if item is not None:
                items.append(item)
        if texts:
            items.append(_message_item(message.role, texts))
    return items


def _message_item(role: str, content: list[JSONObject]) -> JSONObject:
    return {"type": "message", "role": role, "content": content}


def _part_item(part: ThinkingPart | ToolCallPart | ToolResultPart) -> JSONObject | None:
    if isinstance(part, ToolCallPart):
        return {
            "type": "function_call",
            "call_id": part.call_id,
            "name": part.name,
            "arguments": json.dumps(part.arguments, ensure_ascii=False),
        }
    if isinstance(part, ToolResultPart):
        output: str | list[JSONObject] = part.content
        if part.images:
            output = [{"type": "input_text", "text": part.content}] + [
                {"type": "input_image", "image_url": image.data_url} for image in part.images
            ]
        return {"type": "function_call_output", "call_id": part.call_id, "output": output}
    return reasoning_item(part)


def reasoning_item(part: ThinkingPart) -> JSONObject | None:
    """An OpenAI reasoning item to send back, or None. With `store: false` only an item that
    carries its encrypted content can be sent; other providers' thinking is never sent."""
    data = part.provider_data
    if part.provider != PROVIDER or data is None:
        return None
    item_id, encrypted = data.get("id"), data.get("encrypted_content")
    if not isinstance(item_id, str) or not isinstance(encrypted, str) or not encrypted:
        return None
    summary = data.get("summary")
    return {
        "type": "reasoning",
        "id": item_id,
        "encrypted_content": encrypted,
        "summary": summary if isinstance(summary, list) else [],
    }
