"""Anthropic Messages API requests: the JSON body and headers of `POST /v1/messages`.

Pure functions from Grove's wire-neutral `Request`; stream.py reads events, errors.py errors.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from grove.providers.anthropic.cache import FORK_MARK, place_breakpoints
from grove.providers.base import (
    CachePoint,
    ImagePart,
    JSONObject,
    Message,
    Part,
    Request,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
)
from grove.providers.catalog import DEFAULT_MODELS, model_info
from grove.providers.errors import UnknownModelError
from grove.providers.output import OUTPUT_TOOL, output_mode, output_tool, tool_mode_system
from grove.providers.output_dialects import for_provider
from grove.providers.thinking import anthropic_fields, anthropic_plan

ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_FAMILY = DEFAULT_MODELS["anthropic"]
MESSAGES_PATH = "/v1/messages"
# The API accepts tool_use ids of these characters only; ids made by other providers are
# rewritten the same way on the call and on its result, so the pair still matches.
_TOOL_ID_FORBIDDEN = re.compile(r"[^A-Za-z0-9_-]")
THINKING_OFF_IN_FOREIGN_TOOL_LOOP = (
    "Thinking is off for this reply: it continues a tool call made without Anthropic "
    "thinking, and the API only accepts thinking there when the call began with it"
)


def request_headers(api_key: str) -> dict[str, str]:
    return {
        "x-api-key": api_key,
        "anthropic-version": ANTHROPIC_VERSION,
        "content-type": "application/json",
    }


def request_body(request: Request) -> tuple[JSONObject, tuple[str, ...]]:
    """The streaming Messages body for `request`, and warning lines to show the user."""
    plan = anthropic_plan(request.model, request.thinking)
    messages = wire_messages(request.messages)
    warnings: tuple[str, ...] = (plan.warning,) if plan.warning else ()
    if plan.thinks and continues_tool_loop_without_thinking(messages):
        off = anthropic_plan(request.model, "none")
        if not off.thinks:  # a model that always thinks keeps its setting
            plan, warnings = off, (THINKING_OFF_IN_FOREIGN_TOOL_LOOP,)
    thinking, max_tokens = anthropic_fields(plan, request.model, request.max_tokens)
    body: JSONObject = {
        "model": request.model,
        "max_tokens": max_tokens,
        "stream": True,
        "messages": messages,
    }
    if request.system:
        body["system"] = request.system
    if request.tools:
        body["tools"] = [wire_tool(tool) for tool in request.tools]
    if thinking is not None:
        body["thinking"] = thinking
    if plan.effort is not None:
        body["output_config"] = {"effort": plan.effort}
    if request.output is not None:
        _ask_for_output(body, request, thinking_on=plan.thinks)
    place_breakpoints(body, request.cache, cache_min_tokens(request.model))
    return body, warnings


def cache_min_tokens(model: str) -> int:
    """The model's minimum cacheable length (a compatible server's model: its family's)."""
    try:
        return model_info(model, "anthropic").cache_min_tokens
    except UnknownModelError:
        return model_info(DEFAULT_FAMILY).cache_min_tokens


def _ask_for_output(body: JSONObject, request: Request, *, thinking_on: bool) -> None:
    """Structured outputs (`output_config.format`) where the model has them, else a final
    tool the model must call: named when it is the only tool, any tool when there are
    others. With thinking on, or on a model that refuses forced tool choice (Claude 5.5 and
    Fable), no tool is forced: the system prompt asks instead."""
    output = request.output
    assert output is not None
    if output_mode("anthropic", request) == "native":
        schema = for_provider(output.schema, "anthropic")
        config = body.setdefault("output_config", {})
        config["format"] = {"type": "json_schema", "schema": schema}
        return
    body["tools"] = [*body.get("tools", []), wire_tool(output_tool(output))]
    body["system"] = tool_mode_system(request.system)
    if not thinking_on and model_info(request.model, "anthropic").forced_tool_choice:
        only = len(body["tools"]) == 1
        body["tool_choice"] = {"type": "tool", "name": OUTPUT_TOOL} if only else {"type": "any"}


def wire_tool(tool: ToolSpec) -> JSONObject:
    return {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}


def wire_messages(messages: Iterable[Message]) -> list[JSONObject]:
    """One wire message per run of same-role messages; parts the API cannot take are left out.

    Left out: empty text, thinking from other providers (their signatures are rejected) and
    unsigned thinking. In a user message the tool results come first, as the API requires.
    A `CachePoint` marks the block before it (cache.py places the breakpoints).
    """
    wire: list[JSONObject] = []
    for message in messages:
        blocks: list[JSONObject] = []
        for part in message.parts:
            if isinstance(part, CachePoint):
                before = blocks or (wire[-1]["content"] if wire else [])
                if before:
                    before[-1][FORK_MARK] = True
            elif block := wire_block(message, part):
                blocks.append(block)
        if not blocks:
            continue
        if wire and wire[-1]["role"] == message.role:
            blocks = wire[-1]["content"] + blocks
            wire.pop()
        if message.role == "user":
            blocks.sort(key=lambda block: block["type"] != "tool_result")
        wire.append({"role": message.role, "content": blocks})
    return wire


def wire_block(message: Message, part: Part) -> JSONObject | None:
    """The content block for one part, None when it is not to be sent, ValueError if misplaced."""
    match part:
        case TextPart(text=text):
            return {"type": "text", "text": text} if text else None
        case ThinkingPart():
            _require_role(message, "assistant", "thinking")
            return _thinking_block(part)
        case ToolCallPart(call_id=call_id, name=name, arguments=arguments):
            _require_role(message, "assistant", "a tool call")
            return {
                "type": "tool_use",
                "id": wire_tool_id(call_id),
                "name": name,
                "input": arguments,
            }
        case ImagePart(image=image):
            _require_role(message, "user", "an image")
            source = {"type": "base64", "media_type": image.media_type, "data": image.data}
            return {"type": "image", "source": source}
        case ToolResultPart(call_id=call_id, content=content, is_error=is_error, images=images):
            _require_role(message, "user", "a tool result")
            block: JSONObject = {"type": "tool_result", "tool_use_id": wire_tool_id(call_id)}
            if images:
                leading: list[JSONObject] = [{"type": "text", "text": content}] if content else []
                block["content"] = leading + [
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": i.media_type, "data": i.data},
                    }
                    for i in images
                ]
            elif content:
                block["content"] = content
            if is_error:
                block["is_error"] = True
            return block
        case CachePoint():
            return None


def _thinking_block(part: ThinkingPart) -> JSONObject | None:
    if part.provider != "anthropic":
        return None
    data = part.provider_data or {}
    if data.get("type") == "redacted_thinking" and isinstance(data.get("data"), str):
        return {"type": "redacted_thinking", "data": data["data"]}
    if part.signature:
        return {"type": "thinking", "thinking": part.text, "signature": part.signature}
    return None


def _require_role(message: Message, role: str, what: str) -> None:
    if message.role != role:
        raise ValueError(f"anthropic: {what} can only be sent in {role} messages")


def wire_tool_id(call_id: str) -> str:
    return _TOOL_ID_FORBIDDEN.sub("_", call_id)


def continues_tool_loop_without_thinking(messages: list[JSONObject]) -> bool:
    """True when the request answers tool calls whose assistant message has no leading thinking.

    With thinking enabled the API rejects such a request (one tool loop, one thinking setting);
    it happens when the calls were made by another provider or with thinking off.
    """
    if len(messages) < 2 or messages[-1]["role"] != "user":
        return False
    if not any(block["type"] == "tool_result" for block in messages[-1]["content"]):
        return False
    assistant = messages[-2]  # runs of one role are merged, so this is the assistant's
    return assistant["content"][0]["type"] not in ("thinking", "redacted_thinking")
