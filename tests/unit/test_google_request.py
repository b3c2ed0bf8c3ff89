"""GoogleWire.prepare and map_error as pure functions: bodies, headers, thinking, signatures,
function responses, and how Google's error objects decide retries.

The google-genai SDK (a test-only dependency) referees every body: its types forbid unknown
fields, so a misspelt key fails here before it reaches a server.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from google.genai import types

from grove.providers.base import (
    JSONObject,
    Message,
    Request,
    TextPart,
    ThinkingLevel,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
)
from grove.providers.google.request import SIGNATURE_BYPASS
from grove.providers.google.stream import TEXT_SIGNATURE_DATA
from grove.providers.google.wire import GoogleWire
from grove.providers.http import Endpoint, PreparedRequest
from grove.providers.thinking import CANNOT_DISABLE_WARNING

KEY = "AIzaSyTEST-not-a-real-key-0123456789abcd"
ENDPOINT = Endpoint(base_url="http://127.0.0.1:1", api_key=KEY)
WEATHER = ToolSpec(
    name="get_weather",
    description="Weather for a city",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
)


def prepare(request: Request) -> PreparedRequest:
    prepared = GoogleWire().prepare(request, ENDPOINT)
    referee(prepared.body)
    return prepared


def referee(body: JSONObject) -> None:
    """The SDK's own types accept every field Grove sends."""
    assert set(body) <= {"contents", "systemInstruction", "tools", "generationConfig"}
    for content in body["contents"]:
        types.Content.model_validate(content)
    if "systemInstruction" in body:
        types.Content.model_validate(body["systemInstruction"])
    for tool in body.get("tools", []):
        types.Tool.model_validate(tool)
    if "generationConfig" in body:
        types.GenerationConfig.model_validate(body["generationConfig"])


def ask(model: str = "gemini-2.5-flash", **fields: Any) -> Request:
    return Request(model=model, messages=(Message.user("hello"),), **fields)


def model_parts(prepared: PreparedRequest, index: int = 1) -> list[JSONObject]:
    content = prepared.body["contents"][index]
    assert content["role"] == "model"
    parts: list[JSONObject] = content["parts"]
    return parts


# --- path, headers, basic body ----------------------------------------------------------------


def test_key_travels_only_in_its_header() -> None:
    prepared = prepare(ask())
    assert prepared.path == "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    assert prepared.headers["x-goog-api-key"] == KEY
    assert KEY not in prepared.path
    assert KEY not in json.dumps(prepared.body)
    assert KEY not in repr(prepared)


def test_model_id_cannot_escape_its_path_segment() -> None:
    prepared = prepare(ask(model="gemini-x/../../v1/files?key=1"))
    assert prepared.path.startswith("/v1beta/models/gemini-x%2F..%2F..%2Fv1%2Ffiles%3Fkey%3D1:")
    assert prepared.path.count("?") == 1


def test_system_text_and_token_limit() -> None:
    prepared = prepare(ask(system="Be brief.", max_tokens=321))
    assert prepared.body["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    assert prepared.body["contents"] == [{"role": "user", "parts": [{"text": "hello"}]}]
    assert prepared.body["generationConfig"] == {"maxOutputTokens": 321}
    assert prepared.warnings == ()


def test_provider_default_sends_no_generation_config() -> None:
    prepared = prepare(ask())
    assert "generationConfig" not in prepared.body
    assert "systemInstruction" not in prepared.body
    assert "tools" not in prepared.body


def test_tools_become_function_declarations_with_their_json_schema() -> None:
    prepared = prepare(ask(tools=(WEATHER,)))
    assert prepared.body["tools"] == [
        {
            "functionDeclarations": [
                {
                    "name": "get_weather",
                    "description": "Weather for a city",
                    "parametersJsonSchema": WEATHER.parameters,
                }
            ]
        }
    ]


# --- thinking -------------------------------------------------------------------------------


def thinking_config(model: str, level: ThinkingLevel) -> tuple[JSONObject, tuple[str, ...]]:
    prepared = prepare(ask(model=model, thinking=level))
    config: JSONObject = prepared.body["generationConfig"]["thinkingConfig"]
    return config, prepared.warnings


@pytest.mark.parametrize("model", ["gemini-2.5-flash", "gemini-2.5-flash-lite"])
def test_gemini_25_flash_budgets(model: str) -> None:
    off, warnings = thinking_config(model, "none")
    assert off == {"thinkingBudget": 0}
    assert warnings == ()
    budgets = []
    levels: tuple[ThinkingLevel, ...] = ("low", "med", "high")
    for level in levels:
        config, warnings = thinking_config(model, level)
        assert config["includeThoughts"] is True
        assert "thinkingLevel" not in config
        assert warnings == ()
        budgets.append(config["thinkingBudget"])
    assert 0 < budgets[0] < budgets[1] < budgets[2]


def test_gemini_25_pro_cannot_disable_thinking() -> None:
    config, warnings = thinking_config("gemini-2.5-pro", "none")
    low, _ = thinking_config("gemini-2.5-pro", "low")
    assert 0 < config["thinkingBudget"] < low["thinkingBudget"]
    assert config["includeThoughts"] is True
    assert warnings == (CANNOT_DISABLE_WARNING,)
    assert warnings == ("This model does not support disabling thinking",)


@pytest.mark.parametrize(
    ("level", "value"), [("none", "minimal"), ("low", "low"), ("med", "medium"), ("high", "high")]
)
def test_gemini_3_flash_levels(level: ThinkingLevel, value: str) -> None:
    config, warnings = thinking_config("gemini-3.5-flash", level)
    assert config["thinkingLevel"] == value
    assert "thinkingBudget" not in config
    assert config.get("includeThoughts") is (True if level != "none" else None)
    assert warnings == ()


@pytest.mark.parametrize(
    ("level", "value", "warned"),
    [("none", "low", True), ("low", "low", False), ("med", "high", False), ("high", "high", False)],
)
def test_gemini_3_pro_has_two_levels(level: ThinkingLevel, value: str, warned: bool) -> None:
    config, warnings = thinking_config("gemini-3-pro-preview", level)
    assert config == {"thinkingLevel": value, "includeThoughts": True}
    assert warnings == ((CANNOT_DISABLE_WARNING,) if warned else ())


# --- conversation history -------------------------------------------------------------------


def history(*assistant_parts: Any, model: str = "gemini-2.5-flash") -> Request:
    return Request(
        model=model,
        messages=(
            Message.user("weather?"),
            Message(role="assistant", parts=tuple(assistant_parts)),
            Message.user("thanks"),
        ),
    )


def test_gemini_thoughts_go_back_with_their_signatures() -> None:
    prepared = prepare(
        history(
            ThinkingPart(text="Let me think.", signature="c2lnLTE=", provider="google"),
            TextPart(text="Sunny."),
        )
    )
    assert model_parts(prepared) == [
        {"text": "Let me think.", "thought": True, "thoughtSignature": "c2lnLTE="},
        {"text": "Sunny."},
    ]


def test_other_providers_thinking_is_not_sent_to_gemini() -> None:
    prepared = prepare(
        history(
            ThinkingPart(text="Claude thought.", signature="anthropic-sig", provider="anthropic"),
            ThinkingPart(text="", provider="openai", provider_data={"type": "reasoning"}),
            TextPart(text="Sunny."),
        )
    )
    assert model_parts(prepared) == [{"text": "Sunny."}]


def test_a_text_part_signature_goes_back_on_that_text() -> None:
    carrier = ThinkingPart(
        text="", signature="dGV4dC1zaWc=", provider="google", provider_data=TEXT_SIGNATURE_DATA
    )
    prepared = prepare(history(TextPart(text="The result is 2."), carrier, TextPart(text="More.")))
    assert model_parts(prepared) == [
        {"text": "The result is 2.", "thoughtSignature": "dGV4dC1zaWc="},
        {"text": "More."},
    ]


def test_a_text_signature_with_no_text_before_it_keeps_its_own_empty_part() -> None:
    carrier = ThinkingPart(
        text="", signature="dGV4dC1zaWc=", provider="google", provider_data=TEXT_SIGNATURE_DATA
    )
    prepared = prepare(history(carrier))
    assert model_parts(prepared) == [{"text": "", "thoughtSignature": "dGV4dC1zaWc="}]


def test_function_calls_and_responses() -> None:
    request = Request(
        model="gemini-2.5-flash",
        messages=(
            Message.user("weather in Paris and Oslo?"),
            Message(
                role="assistant",
                parts=(
                    ToolCallPart(
                        call_id="c1",
                        name="get_weather",
                        arguments={"city": "Paris"},
                        signature="Y2FsbC1zaWc=",
                    ),
                    ToolCallPart(call_id="c2", name="get_weather", arguments={"city": "Oslo"}),
                ),
            ),
            Message(
                role="user",
                parts=(
                    ToolResultPart(call_id="c1", name="get_weather", content="18C sunny"),
                    ToolResultPart(
                        call_id="c2", name="get_weather", content="city unknown", is_error=True
                    ),
                ),
            ),
        ),
        tools=(WEATHER,),
    )
    prepared = prepare(request)
    assert model_parts(prepared) == [
        {
            "functionCall": {"name": "get_weather", "args": {"city": "Paris"}},
            "thoughtSignature": "Y2FsbC1zaWc=",
        },
        {"functionCall": {"name": "get_weather", "args": {"city": "Oslo"}}},
    ]
    assert prepared.body["contents"][2] == {
        "role": "user",
        "parts": [
            {"functionResponse": {"name": "get_weather", "response": {"output": "18C sunny"}}},
            {"functionResponse": {"name": "get_weather", "response": {"error": "city unknown"}}},
        ],
    }


def test_gemini_3_gets_the_documented_bypass_for_calls_it_did_not_make() -> None:
    calls = (
        ToolCallPart(call_id="toolu_1", name="get_weather", arguments={"city": "Paris"}),
        ToolCallPart(call_id="toolu_2", name="get_weather", arguments={"city": "Oslo"}),
    )
    gemini_3 = model_parts(prepare(history(*calls, model="gemini-3.0-flash")))
    assert [part.get("thoughtSignature") for part in gemini_3] == [SIGNATURE_BYPASS, None]
    gemini_25 = model_parts(prepare(history(*calls, model="gemini-2.5-flash")))
    assert [part.get("thoughtSignature") for part in gemini_25] == [None, None]


def test_gemini_3_keeps_a_real_signature() -> None:
    call = ToolCallPart(call_id="c", name="get_weather", arguments={}, signature="cmVhbA==")
    parts = model_parts(prepare(history(call, model="gemini-3.0-pro")))
    assert parts[0]["thoughtSignature"] == "cmVhbA=="


def test_turns_with_nothing_gemini_can_read_are_left_out() -> None:
    prepared = prepare(
        history(ThinkingPart(text="hidden", provider="anthropic"), TextPart(text=""))
    )
    assert [c["role"] for c in prepared.body["contents"]] == ["user", "user"]


# --- map_error ------------------------------------------------------------------------------


def google_error(code: int, status: str, message: str, *details: JSONObject) -> bytes:
    error = {"code": code, "message": message, "status": status, "details": list(details)}
    return json.dumps({"error": error}).encode()


def retry_info(delay: str) -> JSONObject:
    return {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": delay}


def quota_failure(quota_id: str) -> JSONObject:
    return {
        "@type": "type.googleapis.com/google.rpc.QuotaFailure",
        "violations": [{"quotaMetric": "generate_content_requests", "quotaId": quota_id}],
    }


PER_MINUTE_TEXT = (
    "You exceeded your current quota, please check your plan and billing details. "
    "For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits."
)


def map_error(status: int, body: bytes, headers: dict[str, str] | None = None) -> Any:
    return GoogleWire().map_error(status, httpx.Headers(headers or {}), body)


def test_rate_limit_retries_after_retry_info() -> None:
    body = google_error(
        429,
        "RESOURCE_EXHAUSTED",
        PER_MINUTE_TEXT,
        quota_failure("GenerateRequestsPerMinutePerProjectPerModel"),
        retry_info("1.5s"),
    )
    error = map_error(429, body, {"retry-after": "30"})
    assert error.retryable
    assert error.retry_after == 1.5
    assert error.status == 429
    assert error.kind == "RESOURCE_EXHAUSTED"
    assert error.provider == "google"
    assert str(error).startswith("Gemini API error 429 RESOURCE_EXHAUSTED: You exceeded")


def test_retry_after_header_when_no_retry_info() -> None:
    error = map_error(
        503, google_error(503, "UNAVAILABLE", "The model is overloaded."), {"retry-after": "7"}
    )
    assert error.retryable
    assert error.retry_after == 7.0


@pytest.mark.parametrize(
    ("message", "details"),
    [
        (PER_MINUTE_TEXT, [quota_failure("GenerateRequestsPerDayPerProjectPerModel-FreeTier")]),
        ("Your project has reached its monthly spending cap.", []),
        ("Your prepayment credits are depleted.", []),
        ("Quota exceeded for metric: generate_content_free_tier_requests, limit: 0", []),
        (
            "Resource exhausted.",
            [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "BILLING_DISABLED"}],
        ),
        (PER_MINUTE_TEXT, [retry_info("3600s")]),
    ],
)
def test_hard_quota_and_spend_limits_are_not_retried(
    message: str, details: list[JSONObject]
) -> None:
    error = map_error(429, google_error(429, "RESOURCE_EXHAUSTED", message, *details))
    assert not error.retryable


def test_invalid_key_is_not_retried_and_never_echoed() -> None:
    body = google_error(
        400,
        "INVALID_ARGUMENT",
        f"API key not valid: {KEY}. Please pass a valid API key.",
        {
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": "API_KEY_INVALID",
            "domain": "googleapis.com",
        },
    )
    error = map_error(400, body)
    assert not error.retryable
    assert error.kind == "INVALID_ARGUMENT"
    assert KEY not in str(error)
    assert KEY not in error.body
    assert "API key not valid" in str(error)


@pytest.mark.parametrize(
    ("status", "grpc", "retryable"),
    [
        (401, "UNAUTHENTICATED", False),
        (403, "PERMISSION_DENIED", False),
        (404, "NOT_FOUND", False),
        (500, "INTERNAL", True),
        (503, "UNAVAILABLE", True),
        (504, "DEADLINE_EXCEEDED", True),
    ],
)
def test_status_decides_the_rest(status: int, grpc: str, retryable: bool) -> None:
    error = map_error(status, google_error(status, grpc, "something happened"))
    assert error.retryable is retryable
    assert error.kind == grpc
    assert error.retry_after is None


def test_list_wrapped_and_non_json_bodies() -> None:
    wrapped = b"[" + google_error(429, "RESOURCE_EXHAUSTED", "slow down", retry_info("2s")) + b"]"
    error = map_error(429, wrapped)
    assert (error.retryable, error.retry_after, error.kind) == (True, 2.0, "RESOURCE_EXHAUSTED")
    html = map_error(502, b"<html>Bad Gateway</html>")
    assert html.retryable
    assert html.kind is None
    assert str(html) == "Gemini API error HTTP 502"
    assert html.body == "<html>Bad Gateway</html>"
