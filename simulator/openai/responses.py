"""The OpenAI Responses API as the simulator speaks it: `POST /v1/responses`.

Reads requests into `Inbound`, writes plans as Responses SSE (with sequence numbers) or JSON.
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
    ToolCall,
    estimate_tokens,
    invalid_answers_left,
    locate_script,
    opaque_token,
)
from grove.simulator.wire import (
    Frame,
    FrameRole,
    InvalidRequest,
    Reply,
    content_text,
    named_event,
    objects,
    random_id,
)

PATH = "/v1/responses"
ENCRYPTED_REASONING = "reasoning.encrypted_content"
_HEX = "0123456789abcdef"
TEXT_PARTS = ("input_text", "output_text", "text")


class OpenAIResponses(common.OpenAIAPI):
    name = "openai-responses"
    endpoint = PATH

    def context_overflow(self, tokens: int, window: int) -> Reply:
        return self.error("context_length", param="input")

    def read(self, path: str, query: dict[str, str], body: dict[str, Any]) -> Inbound:
        model = common.required_model(body)
        check_openai(model, body, "reasoning.effort")
        given = body.get("input")
        items = (
            [{"role": "user", "content": given}]
            if isinstance(given, str)
            else objects(given, "input")
        )
        tools = objects(body.get("tools"), "tools")
        include = body.get("include")
        if include is not None and not (
            isinstance(include, list) and all(isinstance(entry, str) for entry in include)
        ):
            raise InvalidRequest(
                "Invalid type for 'include': expected an array of strings.", param="include"
            )
        reasoning = body.get("reasoning")
        if reasoning is not None and not isinstance(reasoning, dict):
            raise InvalidRequest(
                "Invalid type for 'reasoning': expected an object.", param="reasoning"
            )
        summary = (reasoning or {}).get("summary") or (reasoning or {}).get("generate_summary")
        prefixes = self.prefixes(body, [body.get("instructions"), tools, items])
        entries = [entry for item in items if (entry := _entry(item)) is not None]
        script, step = locate_script(entries)
        functions = {
            str(tool.get("name")): tool.get("parameters")
            for tool in tools
            if tool.get("type") == "function"
        }
        text = body.get("text")
        form = text.get("format") if isinstance(text, dict) else None
        structured = common.forced_function(body.get("tool_choice"), functions)
        if structured is None and isinstance(form, dict) and form.get("type") == "json_schema":
            structured = common.json_schema_format(form, "text.format")
        return Inbound(
            model=model,
            prompt=_last_user_prompt(items),
            script=script,
            step=step,
            offered_tools=frozenset(functions),
            thinking=summary is not None
            and common.reasoning_effort_on((reasoning or {}).get("effort")),
            stream=body.get("stream") is True,
            input_tokens=estimate_tokens([body.get("instructions"), items, tools], "openai"),
            body=body,
            prefixes=prefixes,
            structured=structured,
            invalid_left=invalid_answers_left(entries),
        )

    def frames(self, plan: Plan, inbound: Inbound) -> list[Frame]:
        stream = _Stream(inbound)
        stream.lifecycle_start()
        output = [] if not plan.thinking else [stream.reasoning(plan)]
        if plan.text:
            output.append(stream.message(plan, len(output)))
        for call in plan.tool_calls:
            output.append(stream.function_call(call, len(output)))
        status = "incomplete" if plan.cut_off else "completed"
        stream.add(
            f"response.{status}",
            {"response": stream.finished(status, output, _usage(plan, inbound))},
            "terminal",
        )
        return stream.frames

    def error_frames(self, inbound: Inbound) -> list[Frame]:
        stream = _Stream(inbound)
        stream.lifecycle_start()
        error = common.error_object("server_error")
        stream.add("error", {"error": {**error, "code": "server_error"}})
        failed = stream.response("failed", [], None)
        failed["error"] = {"code": "server_error", "message": error["message"]}
        stream.add("response.failed", {"response": failed})
        return stream.frames

    def body(self, plan: Plan, inbound: Inbound) -> dict[str, Any]:
        stream = _Stream(inbound)
        output = [] if not plan.thinking else [stream.reasoning(plan)]
        if plan.text:
            output.append(stream.message(plan, len(output)))
        for call in plan.tool_calls:
            output.append(stream.function_call(call, len(output)))
        status = "incomplete" if plan.cut_off else "completed"
        return stream.finished(status, output, _usage(plan, inbound))


class _Stream:
    """Builds one response's events in order, numbering them; item builders return the
    finished item for the response's `output`."""

    def __init__(self, inbound: Inbound) -> None:
        self.inbound = inbound
        self.response_id = random_id("resp_", 48, _HEX)
        self.created_at = int(time.time())
        self.frames: list[Frame] = []

    def add(self, kind: str, payload: dict[str, Any], role: FrameRole = "meta") -> None:
        event = {"type": kind, "sequence_number": len(self.frames), **payload}
        self.frames.append(named_event(kind, event, role))

    def finished(
        self, status: str, output: list[dict[str, Any]], usage: dict[str, Any]
    ) -> dict[str, Any]:
        """The final response; an incomplete one says the output limit ended it."""
        response = self.response(status, output, usage)
        if status == "incomplete":
            response["incomplete_details"] = {"reason": "max_output_tokens"}
        return response

    def lifecycle_start(self) -> None:
        for kind in ("response.created", "response.in_progress"):
            self.add(kind, {"response": self.response("in_progress", [], None)})

    def response(
        self, status: str, output: list[dict[str, Any]], usage: dict[str, Any] | None
    ) -> dict[str, Any]:
        body = self.inbound.body
        reasoning = body.get("reasoning") or {}
        return {
            "id": self.response_id,
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "background": False,
            "error": None,
            "incomplete_details": None,
            "instructions": body.get("instructions"),
            "max_output_tokens": body.get("max_output_tokens"),
            "max_tool_calls": None,
            "model": self.inbound.model,
            "output": output,
            "parallel_tool_calls": True,
            "previous_response_id": body.get("previous_response_id"),
            "reasoning": {"effort": reasoning.get("effort"), "summary": reasoning.get("summary")},
            "service_tier": openai_tier(body),
            "store": body.get("store", True),
            "temperature": 1.0,
            "text": {"format": {"type": "text"}, "verbosity": "medium", **_text_config(body)},
            "tool_choice": "auto",
            "tools": body.get("tools") or [],
            "top_p": 1.0,
            "truncation": "disabled",
            "usage": usage,
            "user": None,
            "metadata": {},
        }

    def reasoning(self, plan: Plan) -> dict[str, Any]:
        item_id = random_id("rs_", 48, _HEX)
        item: dict[str, Any] = {"id": item_id, "type": "reasoning", "summary": []}
        if ENCRYPTED_REASONING in (self.inbound.body.get("include") or []):
            item["encrypted_content"] = "gAAAAA" + opaque_token(
                "reasoning", plan.thinking_text, 240
            )
        where = {"item_id": item_id, "output_index": 0, "summary_index": 0}
        text = plan.thinking_text
        self.add("response.output_item.added", {"output_index": 0, "item": item})
        self.add(
            "response.reasoning_summary_part.added",
            {**where, "part": {"type": "summary_text", "text": ""}},
        )
        for delta in plan.thinking:
            self.add("response.reasoning_summary_text.delta", {**where, "delta": delta}, "content")
        self.add("response.reasoning_summary_text.done", {**where, "text": text})
        self.add(
            "response.reasoning_summary_part.done",
            {**where, "part": {"type": "summary_text", "text": text}},
        )
        done = {**item, "summary": [{"type": "summary_text", "text": text}]}
        self.add("response.output_item.done", {"output_index": 0, "item": done})
        return done

    def message(self, plan: Plan, index: int) -> dict[str, Any]:
        item_id = random_id("msg_", 48, _HEX)
        text = plan.reply_text
        item = {
            "id": item_id,
            "type": "message",
            "status": "in_progress",
            "content": [],
            "role": "assistant",
        }
        where = {"item_id": item_id, "output_index": index, "content_index": 0}
        part = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
        self.add("response.output_item.added", {"output_index": index, "item": item})
        self.add("response.content_part.added", {**where, "part": part})
        for delta in plan.text:
            self.add(
                "response.output_text.delta", {**where, "delta": delta, "logprobs": []}, "content"
            )
        self.add("response.output_text.done", {**where, "text": text, "logprobs": []})
        finished_part = {**part, "text": text}
        self.add("response.content_part.done", {**where, "part": finished_part})
        done = {**item, "status": "completed", "content": [finished_part]}
        self.add("response.output_item.done", {"output_index": index, "item": done})
        return done

    def function_call(self, call: ToolCall, index: int) -> dict[str, Any]:
        item_id = random_id("fc_", 48, _HEX)
        item = {
            "id": item_id,
            "type": "function_call",
            "status": "in_progress",
            "arguments": "",
            "call_id": random_id("call_", 24),
            "name": call.name,
        }
        where = {"item_id": item_id, "output_index": index}
        self.add("response.output_item.added", {"output_index": index, "item": item})
        for chunk in call.argument_chunks:
            self.add("response.function_call_arguments.delta", {**where, "delta": chunk}, "content")
        arguments = call.arguments_json
        self.add("response.function_call_arguments.done", {**where, "arguments": arguments})
        done = {**item, "status": "completed", "arguments": arguments}
        self.add("response.output_item.done", {"output_index": index, "item": done})
        return done


def _text_config(body: dict[str, Any]) -> dict[str, Any]:
    text = body.get("text")
    return text if isinstance(text, dict) else {}


def _last_user_prompt(items: list[dict[str, Any]]) -> str:
    """The last user message's text, or the tool outputs that end the input."""
    outputs: list[str] = []
    for item in reversed(items):
        if item.get("type") == "function_call_output":
            outputs.insert(0, content_text(item.get("output"), TEXT_PARTS))
            continue
        if outputs:
            break
        if item.get("role") == "user" and item.get("type", "message") == "message":
            return content_text(item.get("content"), TEXT_PARTS)
    return "\n".join(outputs)


def _entry(item: dict[str, Any]) -> tuple[Entry, str] | None:
    """A user message is text; model output items are a reply (a run of them is one reply);
    `*_output` items are results; instructions (system, developer) are none of these."""
    kind = item.get("type", "message")
    role = item.get("role")
    if kind == "message" and role == "user":
        return "text", content_text(item.get("content"), TEXT_PARTS)
    if role == "assistant" or kind == "reasoning" or str(kind).endswith("_call"):
        return "reply", ""
    if str(kind).endswith("_output"):
        return "results", ""
    return None


def _usage(plan: Plan, inbound: Inbound) -> dict[str, Any]:
    output_tokens = plan.content_events
    return {
        "input_tokens": inbound.input_tokens,
        "input_tokens_details": {
            "cached_tokens": min(plan.cache.read, inbound.input_tokens),
            "cache_write_tokens": 0,
        },
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": plan.thinking_tokens},
        "total_tokens": inbound.input_tokens + output_tokens,
    }
