"""OpenAI request bodies and headers (Responses and Chat Completions), and error mapping.

Pure functions, called directly: what goes on the wire for a given Grove request.
"""

from __future__ import annotations

import json

import httpx
import pytest

from grove.providers.base import (
    Message,
    Request,
    TextPart,
    ThinkingLevel,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
)
from grove.providers.errors import ProviderHTTPError
from grove.providers.http import Endpoint
from grove.providers.openai.chat import OpenAIChatWire
from grove.providers.openai.errors import map_error, stream_error
from grove.providers.openai.responses import OpenAIResponsesWire

KEY = "sk-test-0123456789abcdef"
ENDPOINT = Endpoint(base_url="https://api.openai.com", api_key=KEY)
WEATHER = ToolSpec(
    name="get_weather",
    description="Current weather for a city",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)
REASONING_DATA = {
    "id": "rs_1",
    "encrypted_content": "gAAAA-opaque",
    "summary": [{"type": "summary_text", "text": "Look it up."}],
}


def tool_conversation() -> tuple[Message, ...]:
    """A user question, a reply with reasoning and a call, the call's result, a follow-up."""
    return (
        Message.user("Weather in Oslo?"),
        Message(
            role="assistant",
            parts=(
                ThinkingPart(text="Look it up.", provider="openai", provider_data=REASONING_DATA),
                TextPart(text="Checking."),
                ToolCallPart(call_id="call_1", name="get_weather", arguments={"city": "Oslo"}),
            ),
        ),
        Message(
            role="user",
            parts=(
                ToolResultPart(call_id="call_1", name="get_weather", content="-3 °C, snow"),
                TextPart(text="And tomorrow?"),
            ),
        ),
    )


def responses_body(request: Request) -> dict[str, object]:
    return OpenAIResponsesWire().prepare(request, ENDPOINT).body


def chat_body(request: Request) -> dict[str, object]:
    return OpenAIChatWire().prepare(request, ENDPOINT).body


# --- Responses ------------------------------------------------------------------------------


def test_responses_minimal_request() -> None:
    prepared = OpenAIResponsesWire().prepare(
        Request(model="gpt-5-mini", messages=(Message.user("Hi"),)), ENDPOINT
    )
    assert prepared.path == "/v1/responses"
    assert prepared.headers["Authorization"] == f"Bearer {KEY}"
    assert prepared.headers["Accept"] == "text/event-stream"
    assert prepared.body == {
        "model": "gpt-5-mini",
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hi"}]}
        ],
        "stream": True,
        "store": False,
    }
    assert KEY not in repr(prepared)


@pytest.mark.parametrize("base_url", ["http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1/"])
def test_base_url_with_v1_is_not_doubled(base_url: str) -> None:
    endpoint = Endpoint(base_url=base_url, api_key=KEY)
    request = Request(model="gpt-5-mini", messages=(Message.user("Hi"),))
    assert OpenAIResponsesWire().prepare(request, endpoint).path == "/responses"
    assert OpenAIChatWire().prepare(request, endpoint).path == "/chat/completions"


def test_responses_system_tools_and_max_tokens() -> None:
    body = responses_body(
        Request(
            model="gpt-5",
            system="Be brief.",
            messages=(Message.user("Hi"),),
            tools=(WEATHER,),
            max_tokens=2048,
        )
    )
    assert body["instructions"] == "Be brief."
    assert body["max_output_tokens"] == 2048
    assert body["tools"] == [
        {
            "type": "function",
            "name": "get_weather",
            "description": "Current weather for a city",
            "parameters": WEATHER.parameters,
            "strict": False,
        }
    ]


@pytest.mark.parametrize(
    ("model", "level", "effort"),
    [
        ("gpt-5", "none", "minimal"),
        ("gpt-5-mini", "none", "minimal"),
        ("gpt-5-nano", "none", "minimal"),
        ("gpt-5-mini", "low", "low"),
        ("gpt-5-mini", "med", "medium"),
        ("gpt-5-nano", "high", "high"),
        ("gpt-5.1", "none", "none"),
        ("gpt-5.1", "med", "medium"),
        ("gpt-6.1-terra", "none", "none"),
        ("gpt-6-sol", "none", "none"),
        # GPT-6.1 and 6.2 Sol and GPT-6 Astra refuse "none" (and "minimal"): their lowest
        ("gpt-6.1-sol", "none", "low"),
        ("gpt-6.2-sol", "none", "low"),
        ("gpt-6-astra", "none", "low"),
        ("gpt-6.2-sol", "high", "high"),
    ],
)
def test_responses_reasoning_effort(model: str, level: ThinkingLevel, effort: str) -> None:
    prepared = OpenAIResponsesWire().prepare(
        Request(model=model, messages=(Message.user("Hi"),), thinking=level), ENDPOINT
    )
    body = prepared.body
    reasoning = body["reasoning"]
    assert isinstance(reasoning, dict)
    assert reasoning["effort"] == effort
    # Summaries stream whenever the model reasons; "none" and "minimal" ask for none.
    assert ("summary" in reasoning) == (effort not in ("none", "minimal"))
    # A model that cannot stop reasoning says so for "none".
    refused = level == "none" and effort not in ("none", "minimal")
    assert prepared.warnings == (
        ("This model does not support disabling thinking",) if refused else ()
    )
    # Encrypted reasoning is asked for whenever reasoning items can be produced.
    assert ("include" in body) == (effort != "none")
    if effort != "none":
        assert body["include"] == ["reasoning.encrypted_content"]
    assert body["store"] is False


def test_responses_unspecified_thinking_sends_no_reasoning() -> None:
    body = responses_body(Request(model="gpt-5-mini", messages=(Message.user("Hi"),)))
    assert "reasoning" not in body and "include" not in body


def test_responses_sends_reasoning_calls_and_results_back_in_order() -> None:
    body = responses_body(Request(model="gpt-5-mini", messages=tool_conversation()))
    assert body["input"] == [
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "Weather in Oslo?"}],
        },
        {"type": "reasoning", **REASONING_DATA},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Checking."}],
        },
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "get_weather",
            "arguments": '{"city": "Oslo"}',
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "-3 °C, snow"},
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "And tomorrow?"}],
        },
    ]


@pytest.mark.parametrize(
    "part",
    [
        ThinkingPart(text="hmm", signature="sig", provider="anthropic"),
        ThinkingPart(text="hmm", provider="google", provider_data=REASONING_DATA),
        ThinkingPart(text="hmm", provider="openai"),
        ThinkingPart(
            text="hmm", provider="openai", provider_data={"id": "rs_2", "encrypted_content": None}
        ),
    ],
    ids=["anthropic", "google", "openai-no-data", "openai-no-encrypted-content"],
)
def test_responses_drops_thinking_it_cannot_send_back(part: ThinkingPart) -> None:
    messages = (Message.user("Hi"), Message(role="assistant", parts=(part, TextPart(text="Yo"))))
    items = responses_body(Request(model="gpt-5-mini", messages=messages))["input"]
    assert isinstance(items, list)
    assert [item["type"] for item in items] == ["message", "message"]


def test_responses_arguments_are_json_text() -> None:
    call = ToolCallPart(call_id="c", name="f", arguments={"text": "naïve", "n": [1, 2]})
    messages = (Message.user("Hi"), Message(role="assistant", parts=(call,)))
    items = responses_body(Request(model="gpt-5-mini", messages=messages))["input"]
    assert isinstance(items, list)
    assert json.loads(items[1]["arguments"]) == {"text": "naïve", "n": [1, 2]}


# --- Chat Completions -----------------------------------------------------------------------


def test_chat_request() -> None:
    prepared = OpenAIChatWire().prepare(
        Request(
            model="gpt-5-mini",
            system="Be brief.",
            messages=tool_conversation(),
            tools=(WEATHER,),
            max_tokens=1000,
            thinking="med",
        ),
        ENDPOINT,
    )
    assert prepared.path == "/v1/chat/completions"
    assert prepared.headers["Authorization"] == f"Bearer {KEY}"
    assert prepared.body == {
        "model": "gpt-5-mini",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in Oslo?"},
            {
                "role": "assistant",
                "content": "Checking.",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "-3 °C, snow"},
            {"role": "user", "content": "And tomorrow?"},
        ],
        "stream": True,
        "stream_options": {"include_usage": True},
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "Current weather for a city",
                    "parameters": WEATHER.parameters,
                },
            }
        ],
        "max_completion_tokens": 1000,
        "reasoning_effort": "medium",
    }


@pytest.mark.parametrize(
    ("model", "level", "effort"),
    [
        ("gpt-5-mini", None, None),
        ("gpt-5", "none", "minimal"),
        ("gpt-5.1", "none", "none"),
        ("gpt-5-nano", "high", "high"),
        ("gpt-6.1-sol", "none", "low"),
        ("gpt-6.1-terra", "none", "none"),
        # A compatible server's own model id: the plain mapping, no catalog lookup.
        ("Qwen/Qwen3-8B", "low", "low"),
        ("Qwen/Qwen3-8B", "none", "minimal"),
    ],
)
def test_chat_reasoning_effort(model: str, level: ThinkingLevel | None, effort: str | None) -> None:
    body = chat_body(Request(model=model, messages=(Message.user("Hi"),), thinking=level))
    assert body.get("reasoning_effort") == effort


def test_chat_call_only_reply_has_null_content_and_thinking_only_reply_is_dropped() -> None:
    messages = (
        Message.user("Hi"),
        Message(role="assistant", parts=(ThinkingPart(text="...", provider="openai"),)),
        Message.user("Call it"),
        Message(
            role="assistant",
            parts=(ToolCallPart(call_id="c1", name="get_weather", arguments={}),),
        ),
    )
    sent = chat_body(Request(model="gpt-5-mini", messages=messages))["messages"]
    assert isinstance(sent, list)
    assert [message["role"] for message in sent] == ["user", "user", "assistant"]
    assert sent[2]["content"] is None
    assert sent[2]["tool_calls"][0]["function"]["arguments"] == "{}"


def test_chat_several_user_texts_become_content_parts() -> None:
    message = Message(role="user", parts=(TextPart(text="one"), TextPart(text="two")))
    sent = chat_body(Request(model="gpt-5-mini", messages=(message,)))["messages"]
    assert sent == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}],
        }
    ]


# --- errors ---------------------------------------------------------------------------------


def openai_error(message: str, kind: str, code: str | None) -> bytes:
    return json.dumps(
        {"error": {"message": message, "type": kind, "code": code, "param": None}}
    ).encode()


def test_insufficient_quota_429_is_not_retried() -> None:
    error = map_error(
        429,
        httpx.Headers({"retry-after": "20"}),
        openai_error(
            "You exceeded your current quota.", "insufficient_quota", "insufficient_quota"
        ),
    )
    assert isinstance(error, ProviderHTTPError)
    assert error.retryable is False
    assert error.kind == "insufficient_quota"
    assert error.status == 429
    assert str(error) == "OpenAI HTTP 429 insufficient_quota: You exceeded your current quota."


def test_rate_limit_429_is_retried_after_the_servers_hint() -> None:
    error = map_error(
        429,
        httpx.Headers({"retry-after-ms": "1500", "retry-after": "9"}),
        openai_error("Rate limit reached for requests", "requests", "rate_limit_exceeded"),
    )
    assert error.retryable is True
    assert error.retry_after == 1.5
    assert error.kind == "rate_limit_exceeded"


@pytest.mark.parametrize("status", [500, 502, 503, 504])
def test_server_errors_are_retried(status: int) -> None:
    error = map_error(
        status, httpx.Headers(), openai_error("The server had an error", "server_error", None)
    )
    assert error.retryable is True
    assert error.kind == "server_error"
    assert error.retry_after is None


def test_non_json_error_body_is_kept_short_and_readable() -> None:
    page = b"<html><body>" + b"Bad gateway " * 200 + b"</body></html>"
    error = map_error(502, httpx.Headers(), page)
    assert error.retryable is True
    assert error.kind is None
    assert str(error).startswith("OpenAI HTTP 502: <html><body>Bad gateway")
    assert len(str(error)) < 600


def test_auth_error_is_not_retried_and_never_carries_the_key() -> None:
    body = openai_error(
        f"Incorrect API key provided: {KEY}. You can find your API key at https://platform.openai.com/account/api-keys.",
        "invalid_request_error",
        "invalid_api_key",
    )
    error = map_error(401, httpx.Headers(), body)
    assert error.retryable is False
    assert error.kind == "invalid_api_key"
    assert KEY not in str(error) and KEY not in error.body
    assert "Incorrect API key provided: sk-***." in str(error)


def test_billing_code_is_not_retried_even_with_a_retryable_status() -> None:
    body = openai_error(
        "Billing hard limit has been reached", "invalid_request_error", "billing_hard_limit_reached"
    )
    assert map_error(429, httpx.Headers(), body).retryable is False


@pytest.mark.parametrize(
    ("error", "retryable"),
    [
        ({"code": "server_error", "message": "oops"}, True),
        ({"code": "rate_limit_exceeded", "message": "slow down"}, True),
        ({"type": "overloaded_error", "message": "busy"}, True),
        ({"message": "no cause given"}, True),
        ({}, True),
        ({"code": "insufficient_quota", "type": "insufficient_quota", "message": "pay"}, False),
        ({"code": "invalid_api_key", "message": "who?"}, False),
        ({"code": "invalid_prompt", "message": "flagged"}, False),
    ],
)
def test_stream_error_retryability(error: dict[str, str], retryable: bool) -> None:
    raised = stream_error(error)
    assert raised.retryable is retryable
    assert raised.provider == "openai"


def test_chat_sends_a_tool_calls_thought_signature_back() -> None:
    call = ToolCallPart(call_id="fc-1", name="look", arguments={"q": 1}, signature="c2ln")
    plain = ToolCallPart(call_id="fc-2", name="look", arguments={}, signature=None)
    request = Request(
        model="gpt-5-mini",
        messages=(
            Message(role="user", parts=(TextPart(text="go"),)),
            Message(role="assistant", parts=(call, plain)),
        ),
    )
    messages = chat_body(request)["messages"]
    assert isinstance(messages, list)
    signed, unsigned = messages[-1]["tool_calls"]
    assert signed["extra_content"] == {"google": {"thought_signature": "c2ln"}}
    assert "extra_content" not in unsigned
