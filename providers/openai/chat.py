"""The Chat Completions wire (`POST /v1/chat/completions`, SSE) for OpenAI-compatible servers:
request bodies and the `Wire`. Stream chunks are read in chat_stream.
"""

from __future__ import annotations

import json

from grove.providers.base import (
    ImagePart,
    JSONObject,
    Message,
    Request,
    TextPart,
    ThinkingLevel,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
)
from grove.providers.catalog import infer_provider
from grove.providers.openai.chat_stream import ChatParser
from grove.providers.openai.wire import OpenAIWire, strict_format
from grove.providers.thinking import OPENAI_EFFORTS, openai_effort


class OpenAIChatWire(OpenAIWire):
    """Chat Completions, for servers that speak OpenAI's older API (vLLM, llama.cpp, ...)."""

    route = "chat/completions"

    def build(self, request: Request) -> JSONObject:
        return request_body(request)

    def new_parser(self) -> ChatParser:
        return ChatParser()


def request_body(request: Request) -> JSONObject:
    body: JSONObject = {
        "model": request.model,
        "messages": chat_messages(request),
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if request.tools:
        body["tools"] = [tool_definition(tool) for tool in request.tools]
    if request.max_tokens is not None:
        body["max_completion_tokens"] = request.max_tokens
    if request.output is not None:
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": strict_format(request.output),
        }
    effort = reasoning_effort(request.model, request.thinking)
    if effort is not None:
        body["reasoning_effort"] = effort
    if request.tier == "flex":
        body["service_tier"] = "flex"  # batch prices on this endpoint, slower (SPEC 20)
    return body


def reasoning_effort(model: str, level: ThinkingLevel | None) -> str | None:
    """The Responses effort for the same level. A compatible server's own model id (no
    known prefix) gets the plain mapping, as the catalog knows nothing of it."""
    if level is None:
        return None
    if infer_provider(model) is None:
        return OPENAI_EFFORTS[level]
    return openai_effort(model, level)


def tool_definition(tool: ToolSpec) -> JSONObject:
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        },
    }


def chat_messages(request: Request) -> list[JSONObject]:
    """System, then each Grove message. Thinking is never sent back: this API has no place
    for it. Tool results become `tool` messages, in the order they came."""
    messages: list[JSONObject] = []
    if request.system:
        messages.append({"role": "system", "content": request.system})
    for message in request.messages:
        if message.role == "user":
            messages.extend(_user_messages(message))
        else:
            assistant = _assistant_message(message)
            if assistant is not None:
                messages.append(assistant)
    return messages


def _user_messages(message: Message) -> list[JSONObject]:
    messages: list[JSONObject] = []
    texts: list[str] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            texts.append(part.text)
        elif isinstance(part, ImagePart):
            if texts:
                messages.append(_user_text(texts))
                texts = []
            image = {"type": "image_url", "image_url": {"url": part.image.data_url}}
            messages.append({"role": "user", "content": [image]})
        elif isinstance(part, ToolResultPart):
            if texts:
                messages.append(_user_text(texts))
                texts = []
            messages.append({"role": "tool", "tool_call_id": part.call_id, "content": part.content})
            if part.images:  # a tool message holds text only: its images follow as the user's
                messages.append(
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": f"Images from {part.name} ({part.call_id}):"},
                            *(
                                {"type": "image_url", "image_url": {"url": image.data_url}}
                                for image in part.images
                            ),
                        ],
                    }
                )
    if texts:
        messages.append(_user_text(texts))
    return messages


def _tool_call(part: ToolCallPart) -> JSONObject:
    call: JSONObject = {
        "id": part.call_id,
        "type": "function",
        "function": {
            "name": part.name,
            "arguments": json.dumps(part.arguments, ensure_ascii=False),
        },
    }
    if part.signature:  # Gemini's compatible endpoint wants its thought signature back
        call["extra_content"] = {"google": {"thought_signature": part.signature}}
    return call


def _user_text(texts: list[str]) -> JSONObject:
    if len(texts) == 1:
        return {"role": "user", "content": texts[0]}
    return {"role": "user", "content": [{"type": "text", "text": text} for text in texts]}


def _assistant_message(message: Message) -> JSONObject | None:
    """None for a reply that holds only thinking: there is nothing this API can take."""
    text = "".join(part.text for part in message.parts if isinstance(part, TextPart))
    calls = [_tool_call(part) for part in message.parts if isinstance(part, ToolCallPart)]
    if not text and not calls:
        return None
    assistant: JSONObject = {"role": "assistant", "content": text or None}
    if calls:
        assistant["tool_calls"] = calls
    return assistant
