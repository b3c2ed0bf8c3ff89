"""Anthropic Messages request bodies and headers, and the mapping of Anthropic's HTTP errors.

Pure functions, called directly: what goes on the wire for a given Grove request.
"""

from __future__ import annotations

import json

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from grove.providers.anthropic.errors import map_error
from grove.providers.anthropic.request import THINKING_OFF_IN_FOREIGN_TOOL_LOOP
from grove.providers.anthropic.wire import AnthropicWire
from grove.providers.base import (
    THINKING_LEVELS,
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
from grove.providers.catalog import MODELS, model_info
from grove.providers.errors import ProviderHTTPError
from grove.providers.http import Endpoint, PreparedRequest

KEY = "sk-ant-api03-test-0123456789abcdef"
ENDPOINT = Endpoint(base_url="https://api.anthropic.com", api_key=KEY)
MODEL = "claude-sonnet-4-5"
ANTHROPIC_MODELS = sorted(
    [info.id for info in MODELS.values() if info.thinking_style == "anthropic_budget"]
    + ["claude-sonnet-4-5-20250929", "claude-haiku-4-5-20251001"]  # snapshots: their models'
)
WEATHER = ToolSpec(
    name="get_weather",
    description="Current weather for a city",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)
SIGNED = ThinkingPart(text="Look it up.", signature="sig-abc", provider="anthropic")
REDACTED = ThinkingPart(
    text="",
    provider="anthropic",
    provider_data={"type": "redacted_thinking", "data": "EmwKAhgBEgy-opaque"},
)
CALL = ToolCallPart(call_id="toolu_01", name="get_weather", arguments={"city": "Oslo"})
RESULT = ToolResultPart(call_id="toolu_01", name="get_weather", content="-3 °C, snow")


def prepare(request: Request) -> PreparedRequest:
    return AnthropicWire().prepare(request, ENDPOINT)


def body_for(
    *messages: Message,
    system: str | None = None,
    tools: tuple[ToolSpec, ...] = (),
    thinking: ThinkingLevel | None = None,
    max_tokens: int | None = None,
) -> JSONObject:
    request = Request(
        model=MODEL,
        messages=messages,
        system=system,
        tools=tools,
        thinking=thinking,
        max_tokens=max_tokens,
    )
    return prepare(request).body


def assistant(*parts: ThinkingPart | TextPart | ToolCallPart) -> Message:
    return Message(role="assistant", parts=parts)


def user(*parts: TextPart | ToolResultPart) -> Message:
    return Message(role="user", parts=parts)


# --- path, headers, top-level fields -------------------------------------------------------


def test_a_plain_request_is_a_streaming_post_to_v1_messages() -> None:
    prepared = prepare(Request(model=MODEL, messages=(Message.user("Hi"),)))
    assert prepared.path == "/v1/messages"
    assert prepared.headers == {
        "x-api-key": KEY,
        "anthropic-version": "2023-06-01",
        "content-type": "application/json",
    }
    assert prepared.body == {
        "model": MODEL,
        "max_tokens": prepared.body["max_tokens"],
        "stream": True,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
    }
    assert 0 < prepared.body["max_tokens"] <= model_info(MODEL).max_output_tokens
    assert prepared.warnings == ()
    assert KEY not in repr(prepared)
    assert KEY not in json.dumps(prepared.body)


def test_system_and_tools_are_sent_in_anthropic_shape() -> None:
    body = body_for(Message.user("Weather?"), system="Be brief.", tools=(WEATHER,))
    assert body["system"] == "Be brief."
    assert body["tools"] == [
        {
            "name": "get_weather",
            "description": "Current weather for a city",
            "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
        }
    ]


def test_no_system_and_no_tools_send_no_fields() -> None:
    body = body_for(Message.user("Hi"), system="")
    assert "system" not in body
    assert "tools" not in body


def test_a_given_max_tokens_is_sent_when_thinking_is_off() -> None:
    assert body_for(Message.user("Hi"), max_tokens=1000)["max_tokens"] == 1000
    assert body_for(Message.user("Hi"), max_tokens=1000, thinking="none")["max_tokens"] == 1000


def test_max_tokens_never_exceeds_the_models_maximum_output() -> None:
    ceiling = model_info(MODEL).max_output_tokens
    assert body_for(Message.user("Hi"), max_tokens=ceiling * 10)["max_tokens"] == ceiling


# --- thinking --------------------------------------------------------------------------------


@pytest.mark.parametrize("model", ANTHROPIC_MODELS)
def test_thinking_budgets_obey_the_api_rules_and_rise_with_the_level(model: str) -> None:
    ceiling = model_info(model).max_output_tokens
    budgets = []
    for level in ("low", "med", "high"):
        body = prepare(Request(model=model, messages=(Message.user("Hi"),), thinking=level)).body
        assert body["thinking"]["type"] == "enabled"
        budget = body["thinking"]["budget_tokens"]
        assert 1024 <= budget < body["max_tokens"] <= ceiling, (level, body)
        budgets.append(budget)
    assert budgets[0] < budgets[1] < budgets[2]


@given(
    level=st.sampled_from(["low", "med", "high"]),
    max_tokens=st.none() | st.integers(min_value=1, max_value=1_000_000),
    model=st.sampled_from(ANTHROPIC_MODELS),
)
def test_thinking_budget_rules_hold_for_any_max_tokens(
    level: ThinkingLevel, max_tokens: int | None, model: str
) -> None:
    request = Request(
        model=model, messages=(Message.user("Hi"),), thinking=level, max_tokens=max_tokens
    )
    body = prepare(request).body
    budget = body["thinking"]["budget_tokens"]
    assert 1024 <= budget < body["max_tokens"] <= model_info(model).max_output_tokens


def test_adaptive_models_send_an_effort_and_no_budget() -> None:
    body = prepare(
        Request(model="claude-sonnet-5-5", messages=(Message.user("Hi"),), thinking="med")
    ).body
    assert body["thinking"] == {"type": "adaptive"}
    assert body["output_config"] == {"effort": "medium"}
    body = prepare(Request(model="claude-sonnet-5-5", messages=(Message.user("Hi"),))).body
    assert "thinking" not in body and "output_config" not in body


@pytest.mark.parametrize(
    ("model", "thinking", "config", "warned"),
    [
        # Sonnet 5.5 refuses "disabled": its lowest setting is between_tools (no other field)
        ("claude-sonnet-5-5", {"type": "between_tools"}, None, True),
        # Opus 5.5 and Fable always think: their lowest effort
        ("claude-opus-5-5", {"type": "adaptive"}, {"effort": "low"}, True),
        ("claude-fable-5-2", {"type": "adaptive"}, {"effort": "low"}, True),
        ("claude-haiku-5-5", {"type": "disabled"}, None, False),
        ("claude-opus-4-6", {"type": "disabled"}, None, False),
        ("claude-haiku-4-5", None, None, False),  # thinks only when asked
    ],
)
def test_none_is_the_nearest_setting_the_model_accepts(
    model: str, thinking: JSONObject | None, config: JSONObject | None, warned: bool
) -> None:
    prepared = prepare(Request(model=model, messages=(Message.user("Hi"),), thinking="none"))
    assert prepared.body.get("thinking") == thinking
    assert prepared.body.get("output_config") == config
    assert prepared.warnings == (
        ("This model does not support disabling thinking",) if warned else ()
    )


@pytest.mark.parametrize("level", [None, "none"])
def test_no_thinking_field_when_thinking_is_none_or_unspecified(
    level: ThinkingLevel | None,
) -> None:
    assert "thinking" not in body_for(Message.user("Hi"), thinking=level)


def test_every_level_is_accepted() -> None:
    for level in THINKING_LEVELS:
        body_for(Message.user("Hi"), thinking=level)


# --- messages --------------------------------------------------------------------------------


def test_signed_thinking_text_and_tool_calls_go_back_in_order() -> None:
    body = body_for(
        Message.user("Weather in Oslo?"),
        assistant(SIGNED, TextPart(text="Checking."), CALL),
        user(RESULT),
        thinking="med",
    )
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Weather in Oslo?"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Look it up.", "signature": "sig-abc"},
                {"type": "text", "text": "Checking."},
                {
                    "type": "tool_use",
                    "id": "toolu_01",
                    "name": "get_weather",
                    "input": {"city": "Oslo"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_01", "content": "-3 °C, snow"}
            ],
        },
    ]
    assert body["thinking"]["type"] == "enabled"


def test_redacted_thinking_goes_back_from_its_provider_data() -> None:
    body = body_for(Message.user("Hi"), assistant(REDACTED, TextPart(text="Hello.")))
    assert body["messages"][1]["content"] == [
        {"type": "redacted_thinking", "data": "EmwKAhgBEgy-opaque"},
        {"type": "text", "text": "Hello."},
    ]


@pytest.mark.parametrize(
    "thinking",
    [
        ThinkingPart(text="Reasoning.", provider="openai", provider_data={"id": "rs_1"}),
        ThinkingPart(text="Thought.", signature="gemini-sig", provider="google"),
        ThinkingPart(text="Unknown origin.", signature="sig"),
        ThinkingPart(text="Anthropic but unsigned.", provider="anthropic"),
    ],
    ids=["openai", "google", "no-provider", "unsigned"],
)
def test_thinking_that_anthropic_cannot_verify_is_not_sent(thinking: ThinkingPart) -> None:
    body = body_for(Message.user("Hi"), assistant(thinking, TextPart(text="Hello.")))
    assert body["messages"][1]["content"] == [{"type": "text", "text": "Hello."}]


def test_an_assistant_message_left_empty_is_dropped_and_the_users_are_joined() -> None:
    foreign = ThinkingPart(text="Hmm.", provider="openai")
    body = body_for(Message.user("One"), assistant(foreign, TextPart(text="")), Message.user("Two"))
    assert body["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "One"}, {"type": "text", "text": "Two"}],
        }
    ]


def test_tool_results_come_first_in_their_user_message() -> None:
    body = body_for(
        Message.user("Weather?"),
        assistant(CALL),
        user(TextPart(text="Also tomorrow?"), RESULT),
    )
    assert [block["type"] for block in body["messages"][2]["content"]] == ["tool_result", "text"]


def test_a_failed_tool_result_is_marked_and_an_empty_one_has_no_content() -> None:
    failed = ToolResultPart(call_id="toolu_01", name="get_weather", content="", is_error=True)
    body = body_for(Message.user("Weather?"), assistant(CALL), user(failed))
    assert body["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_01", "is_error": True}
    ]


def test_foreign_tool_call_ids_are_rewritten_alike_on_call_and_result() -> None:
    call = ToolCallPart(call_id="fc:7/a.b", name="get_weather", arguments={})
    result = ToolResultPart(call_id="fc:7/a.b", name="get_weather", content="ok")
    body = body_for(Message.user("Weather?"), assistant(call), user(result))
    use_id = body["messages"][1]["content"][0]["id"]
    assert use_id == "fc_7_a_b"
    assert body["messages"][2]["content"][0]["tool_use_id"] == use_id


@pytest.mark.parametrize(
    ("message", "text"),
    [
        (Message(role="user", parts=(CALL,)), "a tool call can only be sent in assistant messages"),
        (
            Message(role="assistant", parts=(RESULT,)),
            "a tool result can only be sent in user messages",
        ),
        (Message(role="user", parts=(SIGNED,)), "thinking can only be sent in assistant messages"),
    ],
)
def test_a_part_in_the_wrong_role_is_a_precise_error(message: Message, text: str) -> None:
    with pytest.raises(ValueError, match=text):
        body_for(Message.user("Hi"), message)


# --- thinking within one tool loop -----------------------------------------------------------


def test_thinking_is_off_when_answering_tool_calls_made_without_anthropic_thinking() -> None:
    request = Request(
        model=MODEL,
        messages=(
            Message.user("Weather in Oslo?"),
            assistant(ThinkingPart(text="Look.", provider="openai"), CALL),
            user(RESULT),
        ),
        thinking="high",
    )
    prepared = prepare(request)
    assert "thinking" not in prepared.body
    assert prepared.warnings == (THINKING_OFF_IN_FOREIGN_TOOL_LOOP,)


@pytest.mark.parametrize(
    ("model", "level", "thinking"),
    [
        ("claude-haiku-5-5", None, {"type": "disabled"}),  # thinks by default: turned off
        ("claude-haiku-5-5", "high", {"type": "disabled"}),
        ("claude-sonnet-5-5", "med", {"type": "between_tools"}),  # its lowest, never disabled
        ("claude-opus-4-6", "low", {"type": "disabled"}),
    ],
)
def test_a_foreign_tool_loop_gets_the_models_own_setting_without_thinking(
    model: str, level: ThinkingLevel | None, thinking: JSONObject
) -> None:
    foreign_loop = (Message.user("Weather in Oslo?"), assistant(CALL), user(RESULT))
    prepared = prepare(Request(model=model, messages=foreign_loop, thinking=level))
    assert prepared.body["thinking"] == thinking
    assert "output_config" not in prepared.body
    assert prepared.warnings == (THINKING_OFF_IN_FOREIGN_TOOL_LOOP,)


@pytest.mark.parametrize("leading", [SIGNED, REDACTED], ids=["signed", "redacted"])
def test_thinking_stays_on_when_the_tool_calls_began_with_anthropic_thinking(
    leading: ThinkingPart,
) -> None:
    prepared = prepare(
        Request(
            model=MODEL,
            messages=(Message.user("Weather?"), assistant(leading, CALL), user(RESULT)),
            thinking="high",
        )
    )
    assert prepared.body["thinking"]["type"] == "enabled"
    assert prepared.warnings == ()


def test_a_new_user_turn_after_a_foreign_tool_loop_keeps_thinking() -> None:
    prepared = prepare(
        Request(
            model=MODEL,
            messages=(
                Message.user("Weather?"),
                assistant(CALL),
                user(RESULT),
                assistant(TextPart(text="Snow.")),
                Message.user("Thanks. And Bergen?"),
            ),
            thinking="low",
        )
    )
    assert prepared.body["thinking"]["type"] == "enabled"
    assert prepared.warnings == ()


# --- map_error -------------------------------------------------------------------------------


def error_body(kind: str, message: str, **extra: object) -> bytes:
    error: dict[str, object] = {"type": kind, "message": message, **extra}
    return json.dumps({"type": "error", "error": error, "request_id": "req_1"}).encode()


def test_a_rate_limit_is_retryable_after_the_servers_delay() -> None:
    error = map_error(
        429,
        httpx.Headers({"retry-after": "7"}),
        error_body("rate_limit_error", "Number of request tokens has exceeded your limit."),
    )
    assert isinstance(error, ProviderHTTPError)
    assert str(error) == (
        "anthropic: 429 rate_limit_error: Number of request tokens has exceeded your limit."
    )
    assert (error.status, error.kind, error.retryable, error.retry_after) == (
        429,
        "rate_limit_error",
        True,
        7.0,
    )
    assert error.provider == "anthropic"


def test_retry_after_ms_wins_over_retry_after() -> None:
    headers = httpx.Headers({"retry-after-ms": "1500", "retry-after": "9"})
    error = map_error(429, headers, error_body("rate_limit_error", "Slow down."))
    assert error.retry_after == 1.5


@pytest.mark.parametrize(
    ("status", "kind"),
    [(529, "overloaded_error"), (500, "api_error"), (504, "timeout_error"), (503, "api_error")],
)
def test_server_side_failures_are_retryable(status: int, kind: str) -> None:
    error = map_error(status, httpx.Headers(), error_body(kind, "Try again."))
    assert error.retryable
    assert str(error) == f"anthropic: {status} {kind}: Try again."


@pytest.mark.parametrize(
    ("status", "kind", "message"),
    [
        (401, "authentication_error", "invalid x-api-key"),
        (403, "permission_error", "Your API key does not have permission to use this resource."),
        (400, "invalid_request_error", "messages: at least one message is required"),
        (404, "not_found_error", "model: claude-nope"),
        (413, "request_too_large", "Request exceeds the maximum allowed number of bytes."),
        (402, "billing_error", "Your account has a billing problem."),
        (400, "invalid_request_error", "Your credit balance is too low to access the API."),
        (
            429,
            "rate_limit_error",
            "You have reached your specified API usage limits. You will regain access later.",
        ),
        (500, "invalid_request_error", "A request error reported with an odd status."),
    ],
)
def test_identity_money_and_request_errors_are_never_retried(
    status: int, kind: str, message: str
) -> None:
    error = map_error(status, httpx.Headers({"retry-after": "1"}), error_body(kind, message))
    assert not error.retryable
    assert str(error) == f"anthropic: {status} {kind}: {message}"
    assert error.kind == kind


def test_a_spend_limit_named_only_in_the_details_is_not_retried() -> None:
    body = error_body(
        "rate_limit_error",
        "Request refused.",
        details={"error_code": "enforced_spend_limit_reached"},
    )
    error = map_error(429, httpx.Headers(), body)
    assert not error.retryable
    assert str(error) == (
        "anthropic: 429 rate_limit_error (enforced_spend_limit_reached): Request refused."
    )


def test_a_body_that_is_not_anthropics_error_shape_is_quoted() -> None:
    error = map_error(502, httpx.Headers(), b"<html>Bad gateway</html>\n")
    assert str(error) == "anthropic: 502: <html>Bad gateway</html>"
    assert error.kind is None
    assert error.retryable


def test_an_empty_body_says_so() -> None:
    assert str(map_error(503, httpx.Headers(), b"")) == "anthropic: 503: empty body"


def test_a_key_echoed_in_an_error_never_reaches_its_text_or_body() -> None:
    body = error_body("authentication_error", f"invalid x-api-key {KEY}")
    error = map_error(401, httpx.Headers(), body)
    assert KEY not in str(error)
    assert KEY not in error.body
    assert "sk-***" in str(error)


def test_a_long_message_is_clipped() -> None:
    error = map_error(400, httpx.Headers(), error_body("invalid_request_error", "x" * 5000))
    assert len(str(error)) < 600


@given(status=st.integers(min_value=400, max_value=599), body=st.binary(max_size=300))
def test_any_error_body_maps_to_an_http_error(status: int, body: bytes) -> None:
    error = map_error(status, httpx.Headers(), body)
    assert isinstance(error, ProviderHTTPError)
    assert str(error).startswith(f"anthropic: {status}")
    assert error.status == status


@given(
    status=st.integers(min_value=400, max_value=599),
    error=st.dictionaries(
        st.sampled_from(["type", "message", "details"]),
        st.none() | st.integers() | st.text(max_size=40) | st.dictionaries(st.text(), st.text()),
    ),
)
def test_any_error_object_maps_to_an_http_error(status: int, error: JSONObject) -> None:
    body = json.dumps({"type": "error", "error": error}).encode()
    mapped = map_error(status, httpx.Headers(), body)
    assert str(mapped).startswith(f"anthropic: {status}")
