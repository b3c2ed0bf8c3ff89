"""Where each simulated API finds the script and the step: the last user message that carries
text, and 1 + the model replies after it, in each vendor's own conversation shapes."""

from __future__ import annotations

from typing import Any

import pytest

from grove.simulator.anthropic.messages import AnthropicMessages
from grove.simulator.google.generate import GeminiGenerateContent
from grove.simulator.openai.chat import OpenAIChat
from grove.simulator.openai.responses import OpenAIResponses
from grove.simulator.script import Inbound

SCRIPT = "Fan out. [[sim step=2 tool=wait]]"


def anthropic(*messages: dict[str, Any]) -> Inbound:
    body = {"model": "m", "max_tokens": 64, "messages": list(messages)}
    return AnthropicMessages().read("/v1/messages", {}, body)


def responses(given: object, **extra: Any) -> Inbound:
    return OpenAIResponses().read("/v1/responses", {}, {"model": "m", "input": given, **extra})


def chat(*messages: dict[str, Any]) -> Inbound:
    return OpenAIChat().read("/v1/chat/completions", {}, {"model": "m", "messages": list(messages)})


def gemini(*contents: dict[str, Any], **extra: Any) -> Inbound:
    path = "/v1beta/models/g:generateContent"
    return GeminiGenerateContent().read(path, {}, {"contents": list(contents), **extra})


def where(inbound: Inbound) -> tuple[str, int, str]:
    return inbound.script, inbound.step, inbound.prompt


# --- Anthropic --------------------------------------------------------------------------------


def tool_uses(*names: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": [{"type": "text", "text": "Calling."}]
        + [
            {"type": "tool_use", "id": f"toolu_{i}", "name": name, "input": {}}
            for i, name in enumerate(names)
        ],
    }


def tool_results(*texts: str) -> dict[str, Any]:
    return {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": text}
            for i, text in enumerate(texts)
        ],
    }


def test_anthropic_steps() -> None:
    first = {"role": "user", "content": SCRIPT}
    assert where(anthropic(first)) == (SCRIPT, 1, SCRIPT)
    blocks = {"role": "user", "content": [{"type": "text", "text": SCRIPT}]}
    round_one = (tool_uses("fork", "fork", "fork"), tool_results("a", "b", "c"))
    assert where(anthropic(blocks, *round_one)) == (SCRIPT, 2, "a\nb\nc")
    round_two = (tool_uses("wait"), tool_results("done"))
    assert where(anthropic(blocks, *round_one, *round_two)) == (SCRIPT, 3, "done")
    # Text beside tool results starts a new script; a prefill counts as a reply.
    with_text = {
        "role": "user",
        "content": [*tool_results("x")["content"], {"type": "text", "text": "now this"}],
    }
    assert where(anthropic(first, tool_uses("fork"), with_text)) == ("now this", 1, "now this")
    prefill = {"role": "assistant", "content": "Sure,"}
    assert where(anthropic(first, prefill)) == (SCRIPT, 2, SCRIPT)


# --- OpenAI Responses -------------------------------------------------------------------------


def function_calls(*names: str) -> list[dict[str, Any]]:
    return [
        {"type": "function_call", "call_id": f"call_{i}", "name": name, "arguments": "{}"}
        for i, name in enumerate(names)
    ]


def outputs(*texts: str) -> list[dict[str, Any]]:
    return [
        {"type": "function_call_output", "call_id": f"call_{i}", "output": text}
        for i, text in enumerate(texts)
    ]


def test_responses_steps() -> None:
    assert where(responses(SCRIPT)) == (SCRIPT, 1, SCRIPT)
    user = [
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": [{"type": "input_text", "text": SCRIPT}]},
    ]
    # One reply is several items (reasoning, a message, three calls): one step.
    reply = [
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Calling."}],
        },
        *function_calls("fork", "fork", "fork"),
    ]
    round_one = [*user, *reply, *outputs("a", "b", "c")]
    assert where(responses(round_one)) == (SCRIPT, 2, "a\nb\nc")
    round_two = [*round_one, *function_calls("wait"), *outputs("done")]
    assert where(responses(round_two)) == (SCRIPT, 3, "done")
    # With previous_response_id the input may hold only the outputs: no script in sight.
    assert where(responses(outputs("a"), previous_response_id="resp_1")) == ("", 1, "a")
    again = [*round_one, {"role": "user", "content": "next"}]
    assert where(responses(again)) == ("next", 1, "next")


# --- OpenAI Chat Completions ------------------------------------------------------------------


def assistant_calls(*names: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": "{}"}}
            for i, name in enumerate(names)
        ],
    }


def tool_messages(*texts: str) -> list[dict[str, Any]]:
    return [
        {"role": "tool", "tool_call_id": f"call_{i}", "content": text}
        for i, text in enumerate(texts)
    ]


def test_chat_steps() -> None:
    system = {"role": "system", "content": "Be brief."}
    user = {"role": "user", "content": [{"type": "text", "text": SCRIPT}]}
    assert where(chat(system, user)) == (SCRIPT, 1, SCRIPT)
    round_one = [user, assistant_calls("fork", "fork", "fork"), *tool_messages("a", "b", "c")]
    assert where(chat(system, *round_one)) == (SCRIPT, 2, "a\nb\nc")
    round_two = [*round_one, assistant_calls("wait"), *tool_messages("done")]
    assert where(chat(system, *round_two)) == (SCRIPT, 3, "done")
    assert where(chat(*round_two, {"role": "user", "content": "more"})) == ("more", 1, "more")


# --- Gemini -----------------------------------------------------------------------------------


def model_calls(*names: str) -> dict[str, Any]:
    return {"role": "model", "parts": [{"functionCall": {"name": n, "args": {}}} for n in names]}


def responses_content(*texts: str) -> dict[str, Any]:
    return {
        "role": "user",
        "parts": [
            {"functionResponse": {"name": "fork", "response": {"output": text}}} for text in texts
        ],
    }


def test_gemini_steps() -> None:
    user = {"role": "user", "parts": [{"text": SCRIPT}]}
    system = {"systemInstruction": {"parts": [{"text": "Be brief."}]}}
    assert where(gemini(user, **system)) == (SCRIPT, 1, SCRIPT)
    round_one = [user, model_calls("fork", "fork", "fork"), responses_content("a", "b", "c")]
    results = "\n".join(f'{{"output": "{text}"}}' for text in "abc")
    assert where(gemini(*round_one, **system)) == (SCRIPT, 2, results)
    round_two = [*round_one, model_calls("wait"), responses_content("done")]
    assert where(gemini(*round_two)) == (SCRIPT, 3, '{"output": "done"}')
    # A content without a role is the user's.
    assert where(gemini(*round_two, {"parts": [{"text": "more"}]})) == ("more", 1, "more")


@pytest.mark.parametrize(
    "inbound",
    [
        anthropic({"role": "user", "content": [{"type": "image", "source": {}}]}),
        responses([{"type": "function_call_output", "call_id": "c", "output": "x"}]),
        chat({"role": "system", "content": "only instructions"}),
        gemini({"role": "user", "parts": [{"inlineData": {"mimeType": "image/png", "data": ""}}]}),
    ],
    ids=["anthropic", "responses", "chat", "gemini"],
)
def test_no_user_text_means_an_empty_script_at_step_one(inbound: Inbound) -> None:
    assert (inbound.script, inbound.step) == ("", 1)
