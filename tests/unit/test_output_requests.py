"""Each wire asks for a typed answer its own way: the request bodies Grove builds."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from grove.providers.anthropic.request import request_body as anthropic_body
from grove.providers.base import Message, OutputSchema, Request, ToolSpec
from grove.providers.google.request import build_body as google_body
from grove.providers.openai.chat import request_body as chat_body
from grove.providers.openai.responses import request_body as responses_body
from grove.providers.output import OUTPUT_TOOL, TOOL_MODE_INSTRUCTION
from grove.providers.output_schema import checked_schema

SCHEMA = checked_schema(
    {
        "type": "object",
        "properties": {
            "verdict": {"type": "string", "enum": ["ok", "bad"]},
            "line": {"type": "integer"},
        },
        "required": ["verdict"],
    }
)
OUTPUT = OutputSchema(name="review", schema=SCHEMA)
READ = ToolSpec(name="read", description="Read a file.", parameters={"type": "object"})


def request(model: str, *, tools: bool = False, **given: Any) -> Request:
    return Request(
        model=model,
        messages=(Message.user("Review."),),
        system="Be brief.",
        tools=(READ,) if tools else (),
        output=OUTPUT,
        **given,
    )


def test_openai_responses_text_format_is_strict() -> None:
    form = responses_body(request("gpt-5-mini"))["text"]["format"]
    assert form["type"] == "json_schema" and form["name"] == "review" and form["strict"] is True
    assert form["schema"]["required"] == ["verdict", "line"]
    assert form["schema"]["properties"]["line"] == {"type": ["integer", "null"]}
    assert form["schema"]["additionalProperties"] is False


def test_openai_chat_response_format() -> None:
    form = chat_body(request("gpt-5-mini", tools=True))["response_format"]
    assert form["type"] == "json_schema"
    assert form["json_schema"]["name"] == "review" and form["json_schema"]["strict"] is True


def test_gemini_response_json_schema() -> None:
    body, _ = google_body(request("gemini-3.0-flash", tools=True))
    config = body["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    assert config["responseJsonSchema"]["properties"]["verdict"]["enum"] == ["ok", "bad"]
    assert "toolConfig" not in body


def test_gemini_2_5_with_tools_calls_a_final_function() -> None:
    body, _ = google_body(request("gemini-2.5-flash", tools=True))
    names = [d["name"] for d in body["tools"][0]["functionDeclarations"]]
    assert names == ["read", OUTPUT_TOOL]
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": "ANY"}}
    assert "responseMimeType" not in body.get("generationConfig", {})
    assert TOOL_MODE_INSTRUCTION in body["systemInstruction"]["parts"][0]["text"]


def test_anthropic_structured_outputs() -> None:
    body, _ = anthropic_body(request("claude-sonnet-4-5"))
    assert body["output_config"]["format"]["type"] == "json_schema"
    assert body["output_config"]["format"]["schema"]["additionalProperties"] is False
    assert "tool_choice" not in body and body["system"] == "Be brief."


def test_anthropic_without_structured_outputs_forces_the_final_tool() -> None:
    alone, _ = anthropic_body(request("claude-3-7-sonnet-latest"))
    assert [tool["name"] for tool in alone["tools"]] == [OUTPUT_TOOL]
    assert alone["tool_choice"] == {"type": "tool", "name": OUTPUT_TOOL}
    assert alone["tools"][0]["input_schema"] == SCHEMA
    assert "output_config" not in alone
    with_tools, _ = anthropic_body(request("claude-3-7-sonnet-latest", tools=True))
    assert [tool["name"] for tool in with_tools["tools"]] == ["read", OUTPUT_TOOL]
    assert with_tools["tool_choice"] == {"type": "any"}
    thinking, _ = anthropic_body(request("claude-3-7-sonnet-latest", thinking="low"))
    assert "tool_choice" not in thinking  # the API forces no tool while thinking
    assert thinking["system"].endswith(TOOL_MODE_INSTRUCTION)


# Outside Anthropic's structured-output subset (`prefixItems`): only a final tool takes it.
PAIR = OutputSchema(
    name="pair",
    schema=checked_schema(
        {
            "type": "object",
            "properties": {
                "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}]}
            },
        }
    ),
)


def test_claude_5_5_and_fable_answer_in_output_config_format_and_are_never_forced_a_tool() -> None:
    for model in ("claude-sonnet-5-5", "claude-opus-5-5", "claude-haiku-5-5", "claude-fable-5-2"):
        for level in (None, "none", "low"):
            body, _ = anthropic_body(request(model, tools=True, thinking=level))
            assert body["output_config"]["format"]["type"] == "json_schema", (model, level)
            assert "tool_choice" not in body
            tool_mode, _ = anthropic_body(replace(request(model, thinking=level), output=PAIR))
            assert [tool["name"] for tool in tool_mode["tools"]] == [OUTPUT_TOOL]
            assert "tool_choice" not in tool_mode  # forced tool choice is a 400 there
            assert tool_mode["system"].endswith(TOOL_MODE_INSTRUCTION)
    # Where forced tool choice is taken and thinking is off, the final tool is forced.
    forced, _ = anthropic_body(replace(request("claude-haiku-4-5"), output=PAIR))
    assert forced["tool_choice"] == {"type": "tool", "name": OUTPUT_TOOL}
