"""The Anthropic Messages API as the simulator speaks it: `POST /v1/messages`.

Reads requests into `Inbound` (request.py reads their parts), writes plans as Messages SSE or
JSON; vendor field names only.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from grove.providers.ratelimit import Admission
from grove.simulator.anthropic import thinking_blocks
from grove.simulator.anthropic.request import (
    entry_of,
    last_user_prompt,
    prompt_prefixes,
    structured_of,
    thinking_requested,
)
from grove.simulator.anthropic.rules import check_anthropic
from grove.simulator.script import (
    Inbound,
    Plan,
    estimate_tokens,
    invalid_answers_left,
    locate_script,
)
from grove.simulator.wire import (
    Frame,
    InvalidRequest,
    Problem,
    Reply,
    bearer_token,
    key_problem,
    named_event,
    objects,
    random_id,
    retry_after_headers,
)

PATH = "/v1/messages"
_ERRORS: dict[Problem, tuple[int, str, str]] = {
    "missing_key": (401, "authentication_error", "x-api-key header is required"),
    "bad_key": (401, "authentication_error", "invalid x-api-key"),
    "bad_json": (400, "invalid_request_error", "The request body is not valid JSON."),
    "invalid_request": (400, "invalid_request_error", "Invalid request."),
    "not_found": (404, "not_found_error", "Not Found"),
    "request_too_large": (
        413,
        "request_too_large",
        "Request exceeds the maximum allowed number of bytes.",
    ),
    "model_not_found": (404, "not_found_error", "Not Found"),
    "method_not_allowed": (405, "invalid_request_error", "Method Not Allowed"),
    "rate_limited": (
        429,
        "rate_limit_error",
        "This request would exceed the rate limit for your organization of 50 requests per "
        "minute. For details, refer to: https://docs.claude.com/en/api/rate-limits. You can "
        "see the response headers for current usage. Please try again later.",
    ),
    "server_error": (500, "api_error", "Internal server error"),
    "context_length": (400, "invalid_request_error", "prompt is too long"),
    "unavailable": (503, "api_error", "Service unavailable"),
    "overloaded": (529, "overloaded_error", "Overloaded"),
}


class AnthropicMessages:
    name = "anthropic"

    def __init__(self, refuse_cache_control: bool = False) -> None:
        # As an Anthropic-compatible server without prompt caching answers `cache_control`.
        self.refuse_cache_control = refuse_cache_control

    def handles(self, path: str) -> bool:
        return path == PATH

    def authenticate(
        self, headers: dict[str, str], query: dict[str, str], key: str
    ) -> Problem | None:
        # Grove sends `x-api-key`; newer anthropic SDKs send the same key as a Bearer token.
        return key_problem(headers.get("x-api-key", bearer_token(headers)), key)

    def read(self, path: str, query: dict[str, str], body: dict[str, Any]) -> Inbound:
        model = body.get("model")
        if not isinstance(model, str) or not model:
            raise InvalidRequest("model: Field required")
        max_tokens = body.get("max_tokens")
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
            raise InvalidRequest("max_tokens: Field required (a whole number, 1 or more)")
        messages = objects(body.get("messages"), "messages")
        if not messages:
            raise InvalidRequest("messages: at least one message is required")
        for index, message in enumerate(messages):
            if message.get("role") not in ("user", "assistant"):
                raise InvalidRequest(
                    f"messages.{index}.role: Input should be 'user' or 'assistant'"
                )
            content = message.get("content")
            if content is None:
                raise InvalidRequest(f"messages.{index}.content: Field required")
            if not isinstance(content, str):
                objects(content, f"messages.{index}.content")
        check_anthropic(model, body)
        tools = objects(body.get("tools"), "tools")
        prefixes = prompt_prefixes(
            body, tools, messages, refuse_cache_control=self.refuse_cache_control
        )
        entries = [entry_of(message) for message in messages]
        script, step = locate_script(entries)
        thinking = thinking_requested(body.get("thinking"), max_tokens)
        thinking_blocks.check_request(model, body, thinking)
        return Inbound(
            model=model,
            prompt=last_user_prompt(messages),
            script=script,
            step=step,
            offered_tools=frozenset(str(tool.get("name")) for tool in tools),
            thinking=thinking,
            stream=body.get("stream") is True,
            input_tokens=estimate_tokens([body.get("system"), messages, tools]),
            body=body,
            prefixes=prefixes,
            structured=structured_of(body, tools),
            invalid_left=invalid_answers_left(entries),
        )

    def error(
        self,
        problem: Problem,
        message: str | None = None,
        *,
        param: str | None = None,
        retry_after: float | None = None,
    ) -> Reply:
        status, kind, default = _ERRORS[problem]
        return Reply(
            status=status,
            body=_error_body(kind, message or default),
            headers=retry_after_headers(retry_after),
        )

    def response_headers(self) -> tuple[tuple[str, str], ...]:
        return (("request-id", random_id("req_011C", 20)),)

    def rate_limit_headers(self, admission: Admission) -> tuple[tuple[str, str], ...]:
        """`anthropic-ratelimit-{requests,tokens,input-tokens}-{limit,remaining,reset}`, the
        reset as an RFC 3339 time (only input tokens are counted here)."""
        headers: list[tuple[str, str]] = []
        for name, quota in (
            ("requests", admission.requests),
            ("tokens", admission.tokens),
            ("input-tokens", admission.tokens),
        ):
            if quota is not None:
                reset = datetime.now(UTC) + timedelta(seconds=quota.reset_s)
                headers += [
                    (f"anthropic-ratelimit-{name}-limit", str(quota.limit)),
                    (f"anthropic-ratelimit-{name}-remaining", str(quota.remaining)),
                    (f"anthropic-ratelimit-{name}-reset", reset.strftime("%Y-%m-%dT%H:%M:%SZ")),
                ]
        return tuple(headers)

    def context_overflow(self, tokens: int, window: int) -> Reply:
        return self.error(
            "context_length", f"prompt is too long: {tokens} tokens > {window} maximum"
        )

    def frames(self, plan: Plan, inbound: Inbound) -> list[Frame]:
        message_id = random_id("msg_01", 22)
        frames = [
            named_event(
                "message_start",
                {
                    "type": "message_start",
                    "message": _message(message_id, inbound, plan, [], None, 1),
                },
            )
        ]
        index = 0
        if plan.thinking:
            shown, signature = thinking_blocks.reply_thinking(inbound, plan)
            frames += _block(
                index,
                {"type": "thinking", "thinking": "", "signature": ""},
                [{"type": "thinking_delta", "thinking": delta} for delta in shown],
                {"type": "signature_delta", "signature": signature},
            )
            index += 1
        if plan.text:
            frames += _block(
                index,
                {"type": "text", "text": ""},
                [{"type": "text_delta", "text": delta} for delta in plan.text],
            )
            index += 1
        for call in plan.tool_calls:
            frames += _block(
                index,
                {
                    "type": "tool_use",
                    "id": random_id("toolu_01", 22),
                    "name": call.name,
                    "input": {},
                },
                [
                    {"type": "input_json_delta", "partial_json": chunk}
                    for chunk in call.argument_chunks
                ],
            )
            index += 1
        if len(frames) > 1:
            frames.insert(2, named_event("ping", {"type": "ping"}))
        frames.append(
            named_event(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": _stop_reason(plan), "stop_sequence": None},
                    "usage": {
                        **_prompt_usage(inbound, plan),
                        "output_tokens": plan.content_events,
                    },
                },
            )
        )
        frames.append(named_event("message_stop", {"type": "message_stop"}, "terminal"))
        return frames

    def error_frames(self, inbound: Inbound) -> list[Frame]:
        _, kind, message = _ERRORS["overloaded"]
        return [named_event("error", _error_body(kind, message))]

    def body(self, plan: Plan, inbound: Inbound) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        if plan.thinking:
            shown, signature = thinking_blocks.reply_thinking(inbound, plan)
            content.append({"type": "thinking", "thinking": "".join(shown), "signature": signature})
        if plan.text:
            content.append({"type": "text", "text": plan.reply_text})
        content += [
            {
                "type": "tool_use",
                "id": random_id("toolu_01", 22),
                "name": call.name,
                "input": call.arguments,
            }
            for call in plan.tool_calls
        ]
        return _message(
            random_id("msg_01", 22),
            inbound,
            plan,
            content,
            _stop_reason(plan),
            plan.content_events,
        )


def _stop_reason(plan: Plan) -> str:
    if plan.cut_off:
        return "max_tokens"
    return "tool_use" if plan.tool_calls else "end_turn"


def _prompt_usage(inbound: Inbound, plan: Plan) -> dict[str, Any]:
    """The prompt's tokens as Anthropic splits them: read from the cache, written to it (by
    lifetime), and `input_tokens`, the rest after the last breakpoint."""
    read = min(plan.cache.read, inbound.input_tokens)
    written = min(plan.cache.written, inbound.input_tokens - read)
    long = min(plan.cache.written_1h, written)
    return {
        "input_tokens": inbound.input_tokens - read - written,
        "cache_creation_input_tokens": written,
        "cache_read_input_tokens": read,
        "cache_creation": {
            "ephemeral_5m_input_tokens": written - long,
            "ephemeral_1h_input_tokens": long,
        },
    }


def _usage(inbound: Inbound, plan: Plan, output_tokens: int) -> dict[str, Any]:
    return {
        **_prompt_usage(inbound, plan),
        "output_tokens": output_tokens,
        "service_tier": "standard",
    }


def _message(
    message_id: str,
    inbound: Inbound,
    plan: Plan,
    content: list[dict[str, Any]],
    stop_reason: str | None,
    output_tokens: int,
) -> dict[str, Any]:
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": inbound.model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": _usage(inbound, plan, output_tokens),
    }


def _block(
    index: int,
    start: dict[str, Any],
    deltas: list[dict[str, Any]],
    closing_delta: dict[str, Any] | None = None,
) -> list[Frame]:
    frames = [
        named_event(
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": start},
        )
    ]
    frames += [
        named_event(
            "content_block_delta",
            {"type": "content_block_delta", "index": index, "delta": delta},
            "content",
        )
        for delta in deltas
    ]
    if closing_delta is not None:
        frames.append(
            named_event(
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": closing_delta},
            )
        )
    frames.append(named_event("content_block_stop", {"type": "content_block_stop", "index": index}))
    return frames


def _error_body(kind: str, message: str) -> dict[str, Any]:
    return {
        "type": "error",
        "error": {"type": kind, "message": message},
        "request_id": random_id("req_011C", 20),
    }
