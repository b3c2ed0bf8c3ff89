"""OpenAI Chat Completions as the simulator speaks it: `POST /v1/chat/completions`.

Reads requests into `Inbound`, writes plans as `chat.completion.chunk` SSE or JSON. Thinking
streams as `delta.reasoning_content`, as OpenAI-compatible reasoning servers send it.
"""

from __future__ import annotations

import time
from typing import Any

from grove.simulator.flex import openai_tier
from grove.simulator.openai import common
from grove.simulator.openai.rules import check_openai
from grove.simulator.script import (
    Entry,
    Inbound,
    Plan,
    estimate_tokens,
    invalid_answers_left,
    locate_script,
)
from grove.simulator.wire import (
    Frame,
    FrameRole,
    InvalidRequest,
    Reply,
    content_text,
    data_event,
    objects,
    random_id,
)

PATH = "/v1/chat/completions"
DONE = Frame(b"data: [DONE]\n\n", "terminal")


class OpenAIChat(common.OpenAIAPI):
    name = "openai-chat"
    endpoint = PATH

    def context_overflow(self, tokens: int, window: int) -> Reply:
        message = (
            f"This model's maximum context length is {window} tokens. However, your messages "
            f"resulted in {tokens} tokens. Please reduce the length of the messages."
        )
        return self.error("context_length", message, param="messages")

    def read(self, path: str, query: dict[str, str], body: dict[str, Any]) -> Inbound:
        model = common.required_model(body)
        check_openai(model, body, "reasoning_effort")
        messages = objects(body.get("messages"), "messages")
        if not messages:
            raise InvalidRequest("Missing required parameter: 'messages'.", param="messages")
        for index, message in enumerate(messages):
            if not isinstance(message.get("role"), str):
                raise InvalidRequest(
                    f"Missing required parameter: 'messages[{index}].role'.",
                    param=f"messages[{index}].role",
                )
        tools = objects(body.get("tools"), "tools")
        effort = body.get("reasoning_effort")
        prefixes = self.prefixes(body, [tools, messages])
        entries = [entry for message in messages if (entry := _entry(message)) is not None]
        script, step = locate_script(entries)
        functions = {
            str(tool["function"].get("name")): tool["function"].get("parameters")
            for tool in tools
            if isinstance(tool.get("function"), dict)
        }
        form = body.get("response_format")
        structured = common.forced_function(body.get("tool_choice"), functions)
        if structured is None and isinstance(form, dict) and form.get("type") == "json_schema":
            structured = common.json_schema_format(
                form.get("json_schema"), "response_format.json_schema"
            )
        return Inbound(
            model=model,
            prompt=_last_user_prompt(messages),
            script=script,
            step=step,
            offered_tools=frozenset(functions),
            thinking=effort is not None and common.reasoning_effort_on(effort),
            stream=body.get("stream") is True,
            input_tokens=estimate_tokens([messages, tools], "openai"),
            body=body,
            prefixes=prefixes,
            structured=structured,
            invalid_left=invalid_answers_left(entries),
        )

    def frames(self, plan: Plan, inbound: Inbound) -> list[Frame]:
        options = inbound.body.get("stream_options") or {}
        include_usage = isinstance(options, dict) and options.get("include_usage") is True
        chunk = _ChunkMaker(inbound, include_usage)
        frames = [chunk({"role": "assistant", "content": "", "refusal": None})]
        frames += [chunk({"reasoning_content": delta}, "content") for delta in plan.thinking]
        frames += [chunk({"content": delta}, "content") for delta in plan.text]
        for index, call in enumerate(plan.tool_calls):
            frames.append(
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": index,
                                "id": random_id("call_", 24),
                                "type": "function",
                                "function": {"name": call.name, "arguments": ""},
                            }
                        ]
                    }
                )
            )
            frames += [
                chunk(
                    {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}, "content"
                )
                for piece in call.argument_chunks
            ]
        frames.append(chunk({}, "terminal", finish_reason=_finish_reason(plan)))
        if include_usage:
            frames.append(chunk.usage_chunk(_usage(plan, inbound)))
        frames.append(DONE)
        return frames

    def error_frames(self, inbound: Inbound) -> list[Frame]:
        return [data_event({"error": common.error_object("server_error")})]

    def body(self, plan: Plan, inbound: Inbound) -> dict[str, Any]:
        message: dict[str, Any] = {
            "role": "assistant",
            "content": plan.reply_text if plan.text or not plan.tool_calls else None,
            "refusal": None,
            "annotations": [],
        }
        if plan.thinking:
            message["reasoning_content"] = plan.thinking_text
        if plan.tool_calls:
            message["tool_calls"] = [
                {
                    "id": random_id("call_", 24),
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments_json},
                }
                for call in plan.tool_calls
            ]
        return {
            "id": random_id("chatcmpl-", 29),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": inbound.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": _finish_reason(plan),
                }
            ],
            "usage": _usage(plan, inbound),
            "service_tier": openai_tier(inbound.body),
            "system_fingerprint": random_id("fp_", 10, "0123456789abcdef"),
        }


class _ChunkMaker:
    """Builds the `chat.completion.chunk` events of one stream (one id, one fingerprint)."""

    def __init__(self, inbound: Inbound, include_usage: bool) -> None:
        self.common: dict[str, Any] = {
            "id": random_id("chatcmpl-", 29),
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": inbound.model,
            "service_tier": openai_tier(inbound.body),
            "system_fingerprint": random_id("fp_", 10, "0123456789abcdef"),
        }
        self.include_usage = include_usage

    def __call__(
        self, delta: dict[str, Any], role: FrameRole = "meta", *, finish_reason: str | None = None
    ) -> Frame:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        payload: dict[str, Any] = {**self.common, "choices": [choice]}
        if self.include_usage:
            payload["usage"] = None
        return data_event(payload, role)

    def usage_chunk(self, usage: dict[str, Any]) -> Frame:
        return data_event({**self.common, "choices": [], "usage": usage}, "terminal")


def _last_user_prompt(messages: list[dict[str, Any]]) -> str:
    """The last user message's text, or the tool messages that end the conversation."""
    outputs: list[str] = []
    for message in reversed(messages):
        if message["role"] == "tool":
            outputs.insert(0, content_text(message.get("content")))
            continue
        if outputs:
            break
        if message["role"] == "user":
            return content_text(message.get("content"))
    return "\n".join(outputs)


def _entry(message: dict[str, Any]) -> tuple[Entry, str] | None:
    """User messages are text, assistant messages replies, tool messages results; system and
    developer messages are none of these."""
    role = message["role"]
    if role == "user":
        return "text", content_text(message.get("content"))
    if role == "assistant":
        return "reply", ""
    if role == "tool":
        return "results", ""
    return None


def _finish_reason(plan: Plan) -> str:
    if plan.cut_off:
        return "length"
    return "tool_calls" if plan.tool_calls else "stop"


def _usage(plan: Plan, inbound: Inbound) -> dict[str, Any]:
    completion = plan.content_events
    return {
        "prompt_tokens": inbound.input_tokens,
        "completion_tokens": completion,
        "total_tokens": inbound.input_tokens + completion,
        "prompt_tokens_details": {
            "cached_tokens": min(plan.cache.read, inbound.input_tokens),
            "cache_write_tokens": 0,
            "audio_tokens": 0,
        },
        "completion_tokens_details": {
            "reasoning_tokens": plan.thinking_tokens,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }
