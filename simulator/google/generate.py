"""The Gemini API as the simulator speaks it: `POST /v1beta/models/{model}:generateContent` and
`:streamGenerateContent?alt=sse` (also under `/v1/`, which google-genai uses by default).

Reads requests into `Inbound` (request.py reads their parts), writes plans in Gemini JSON;
vendor field names only.
"""

from __future__ import annotations

import re
from typing import Any

from grove.providers.ratelimit import Admission
from grove.simulator.caching import PromptPrefixes, step_points, strings
from grove.simulator.google.caches import ExplicitCaches
from grove.simulator.google.request import (
    declared_names,
    entry_of,
    field,
    last_user_prompt,
    structured_of,
    thinking_requested,
    thinking_settings,
)
from grove.simulator.google.rules import check_gemini
from grove.simulator.script import (
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
    Problem,
    Reply,
    data_event,
    format_seconds,
    key_problem,
    objects,
    random_id,
    retry_after_headers,
)

PREFIXES = ("/v1beta/", "/v1/models/")
_ENDPOINT = re.compile(
    r"/v1(?:beta)?/models/(?P<model>[^/:]+):(?P<method>streamGenerateContent|generateContent)"
)
_ID_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
_KEY_INVALID = "API key not valid. Please pass a valid API key."
_ERRORS: dict[Problem, tuple[int, str, str]] = {
    "missing_key": (
        403,
        "PERMISSION_DENIED",
        "Method doesn't allow unregistered callers (callers without established identity). "
        "Please use API Key or other form of API consumer identity to call this API.",
    ),
    "bad_key": (400, "INVALID_ARGUMENT", _KEY_INVALID),
    "bad_json": (400, "INVALID_ARGUMENT", "Invalid JSON payload received. Unexpected token."),
    "invalid_request": (400, "INVALID_ARGUMENT", "Request contains an invalid argument."),
    "not_found": (404, "NOT_FOUND", "Requested entity was not found."),
    "model_not_found": (404, "NOT_FOUND", "Requested entity was not found."),
    "method_not_allowed": (405, "UNIMPLEMENTED", "Method not allowed for this URL."),
    "rate_limited": (
        429,
        "RESOURCE_EXHAUSTED",
        "You exceeded your current quota, please check your plan and billing details. For more "
        "information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.",
    ),
    "server_error": (
        500,
        "INTERNAL",
        "An internal error has occurred. Please retry or report in "
        "https://developers.generativeai.google/guide/troubleshooting",
    ),
    "unavailable": (503, "UNAVAILABLE", "The model is overloaded. Please try again later."),
    "overloaded": (503, "UNAVAILABLE", "The model is overloaded. Please try again later."),
    "context_length": (400, "INVALID_ARGUMENT", "The input token count exceeds the limit."),
}


CACHED_WITH_PREFIX = (
    "CachedContent can not be used with GenerateContent request setting system_instruction, "
    "tools or tool_config.\n\nProposed fix: move those values to CachedContent from "
    "GenerateContent request."
)


class GeminiGenerateContent:
    name = "google"

    def __init__(self) -> None:
        self.explicit: ExplicitCaches | None = None  # the cachedContents requests may name

    def handles(self, path: str) -> bool:
        return _ENDPOINT.fullmatch(path) is not None

    def authenticate(
        self, headers: dict[str, str], query: dict[str, str], key: str
    ) -> Problem | None:
        return key_problem(headers.get("x-goog-api-key", query.get("key")), key)

    def read(self, path: str, query: dict[str, str], body: dict[str, Any]) -> Inbound:
        endpoint = _ENDPOINT.fullmatch(path)
        assert endpoint is not None, "the server routes only handled paths here"
        stream = endpoint["method"] == "streamGenerateContent"
        if stream and query.get("alt") != "sse":
            raise InvalidRequest(
                "The simulator streams streamGenerateContent only as server-sent events: "
                "add ?alt=sse to the URL."
            )
        contents = objects(body.get("contents"), "contents")
        if not contents:
            raise InvalidRequest("* GenerateContentRequest.contents: contents is not specified")
        for index, content in enumerate(contents):
            objects(content.get("parts"), f"contents.{index}.parts")
        version = path.split("/")[1]
        check_gemini(endpoint["model"], version, thinking_settings(body))
        tools = objects(body.get("tools"), "tools")
        for index, tool in enumerate(tools):
            declarations = field(tool, "functionDeclarations", "function_declarations")
            objects(declarations, f"tools.{index}.functionDeclarations")
        system = field(body, "systemInstruction", "system_instruction")
        cached = field(body, "cachedContent", "cached_content")
        if cached is not None and self.explicit is not None:
            if system is not None or tools or field(body, "toolConfig", "tool_config"):
                raise InvalidRequest(CACHED_WITH_PREFIX)
            stored = self.explicit.find(cached)
            if stored.model != f"models/{endpoint['model']}":
                raise InvalidRequest(
                    f"Model used by GenerateContent request (models/{endpoint['model']}) and "
                    f"CachedContent ({stored.model}) has to be the same."
                )
            contents, system, tools = stored.contents + contents, stored.system, stored.tools
            prefixes = PromptPrefixes(explicit=stored.tokens)
        else:
            prefixes = PromptPrefixes(points=step_points(strings([system, tools, contents])))
        entries = [entry for content in contents if (entry := entry_of(content)) is not None]
        script, step = locate_script(entries)
        return Inbound(
            model=endpoint["model"],
            prompt=last_user_prompt(contents),
            script=script,
            step=step,
            offered_tools=frozenset(declared_names(tools)),
            thinking=thinking_requested(body),
            stream=stream,
            input_tokens=estimate_tokens([system, contents, tools], "google"),
            body=body,
            prefixes=prefixes,
            structured=structured_of(endpoint["model"], body, tools),
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
        body = _error_body(problem, message)
        if problem == "rate_limited" and retry_after is not None:
            body["error"]["details"] = [
                {
                    "@type": "type.googleapis.com/google.rpc.RetryInfo",
                    "retryDelay": format_seconds(retry_after) + "s",
                }
            ]
        return Reply(
            status=body["error"]["code"], body=body, headers=retry_after_headers(retry_after)
        )

    def response_headers(self) -> tuple[tuple[str, str], ...]:
        return ()

    def rate_limit_headers(self, admission: Admission) -> tuple[tuple[str, str], ...]:
        """Gemini sends none: a 429 carries a RetryInfo detail instead."""
        return ()

    def context_overflow(self, tokens: int, window: int) -> Reply:
        message = (
            f"The input token count ({tokens}) exceeds the maximum number of tokens allowed "
            f"({window})."
        )
        return self.error("context_length", message)

    def frames(self, plan: Plan, inbound: Inbound) -> list[Frame]:
        chunks = _Chunks(plan, inbound)
        for delta in plan.thinking:
            chunks.add({"text": delta, "thought": True}, thoughts=1)
        for delta in plan.text:
            chunks.add({"text": delta}, answer=1)
        for call in plan.tool_calls:
            chunks.add(
                {"functionCall": {"name": call.name, "args": call.arguments}},
                answer=len(call.argument_chunks),
            )
        chunks.add({"text": ""}, finish=True)
        return chunks.frames

    def error_frames(self, inbound: Inbound) -> list[Frame]:
        return [data_event(_error_body("unavailable", None), crlf=True)]

    def body(self, plan: Plan, inbound: Inbound) -> dict[str, Any]:
        parts: list[dict[str, Any]] = []
        if plan.thinking:
            parts.append({"text": plan.thinking_text, "thought": True})
        if plan.text:
            parts.append({"text": plan.reply_text})
        parts += [
            {"functionCall": {"name": call.name, "args": call.arguments}}
            for call in plan.tool_calls
        ]
        if plan.thinking and len(parts) > 1:
            # The first function call carries the signature (parallel calls: only the first).
            signed = 1 + bool(plan.text) if plan.tool_calls else -1
            parts[signed]["thoughtSignature"] = plan.signature
        return _response(
            inbound,
            random_id("", 22, _ID_ALPHABET),
            parts,
            _finish_reason(plan),
            _usage(inbound, plan, plan.answer_tokens, plan.thinking_tokens),
        )


class _Chunks:
    """The chunks of one stream: one part each, running usage, the thought signature on the
    first function call's chunk if any (parallel calls: only the first), else on the first
    text after thoughts."""

    def __init__(self, plan: Plan, inbound: Inbound) -> None:
        self.plan = plan
        self.inbound = inbound
        self.response_id = random_id("", 22, _ID_ALPHABET)
        self.thoughts = 0
        self.answer = 0
        self.signed = not plan.thinking
        self.frames: list[Frame] = []

    def add(
        self, part: dict[str, Any], *, thoughts: int = 0, answer: int = 0, finish: bool = False
    ) -> None:
        self.thoughts += thoughts
        self.answer += answer
        is_call = "functionCall" in part
        first_text = answer and not self.signed and not self.plan.tool_calls
        if not self.signed and (is_call or first_text):
            part = {**part, "thoughtSignature": self.plan.signature}
            self.signed = True
        role: FrameRole = "terminal" if finish else "content"
        usage = _usage(self.inbound, self.plan, self.answer, self.thoughts)
        payload = _response(
            self.inbound,
            self.response_id,
            [part],
            _finish_reason(self.plan) if finish else None,
            usage,
        )
        self.frames.append(data_event(payload, role, crlf=True))


def _finish_reason(plan: Plan) -> str:
    return "MAX_TOKENS" if plan.cut_off else "STOP"


def _response(
    inbound: Inbound,
    response_id: str,
    parts: list[dict[str, Any]],
    finish_reason: str | None,
    usage: dict[str, Any],
) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}}
    if finish_reason is not None:
        candidate["finishReason"] = finish_reason
    candidate["index"] = 0
    return {
        "candidates": [candidate],
        "usageMetadata": usage,
        "modelVersion": inbound.model,
        "responseId": response_id,
    }


def _usage(inbound: Inbound, plan: Plan, answer: int, thoughts: int) -> dict[str, Any]:
    prompt = inbound.input_tokens
    cached = min(plan.cache.read, prompt)
    usage: dict[str, Any] = {"promptTokenCount": prompt}
    if cached:
        usage["cachedContentTokenCount"] = cached
    if answer:
        usage["candidatesTokenCount"] = answer
    usage["totalTokenCount"] = prompt + answer + thoughts
    usage["promptTokensDetails"] = [{"modality": "TEXT", "tokenCount": prompt}]
    if cached:
        usage["cacheTokensDetails"] = [{"modality": "TEXT", "tokenCount": cached}]
    if thoughts:
        usage["thoughtsTokenCount"] = thoughts
    return usage


def _error_body(problem: Problem, message: str | None) -> dict[str, Any]:
    code, status, default = _ERRORS[problem]
    error: dict[str, Any] = {"code": code, "message": message or default, "status": status}
    if problem == "bad_key":
        error["details"] = [
            {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": "API_KEY_INVALID",
                "domain": "googleapis.com",
                "metadata": {"service": "generativelanguage.googleapis.com"},
            },
            {
                "@type": "type.googleapis.com/google.rpc.LocalizedMessage",
                "locale": "en-US",
                "message": _KEY_INVALID,
            },
        ]
    return {"error": error}
