"""How a typed answer is asked for: natively (the wire's own JSON-schema field) or through a
forced final tool, and how an answer given through that tool becomes the reply's text.

Which way a model goes is the catalog's (`ModelInfo.structured_output`); each wire module
renders the way it is given. Validating an answer is the agent's business, not this one's.
"""

from __future__ import annotations

import json
from typing import Literal

from grove.providers.accumulate import INVALID_ARGUMENTS
from grove.providers.base import (
    Message,
    OutputSchema,
    ProviderName,
    Request,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolSpec,
)
from grove.providers.catalog import model_info
from grove.providers.errors import GroveError, OutputSchemaError
from grove.providers.output_dialects import for_provider

OutputMode = Literal["native", "tool"]
OUTPUT_TOOL = "final_result"
OUTPUT_TOOL_DESCRIPTION = (
    "Give your final answer by calling this tool: its arguments are the answer. Call it once, "
    "when you are done, and not before you have used the other tools you need."
)
TOOL_MODE_INSTRUCTION = (
    f"When you have your final answer, give it by calling the `{OUTPUT_TOOL}` tool (its "
    "arguments are the answer); do not write it as text."
)


def output_mode(provider: ProviderName, request: Request) -> OutputMode:
    """Native where the catalog says the model has it for this request (some models have it
    only without tools) and the schema fits the provider's subset; else a forced tool."""
    output = request.output
    assert output is not None
    try:
        support = model_info(request.model, provider).structured_output
    except GroveError:
        support = "tool"
    if support == "tool" or (support == "native_without_tools" and request.tools):
        return "tool"
    if provider == "anthropic":
        try:
            for_provider(output.schema, provider)
        except OutputSchemaError:
            return "tool"  # a shape outside the native subset: the tool takes any schema
    return "native"


def output_tool(output: OutputSchema) -> ToolSpec:
    return ToolSpec(name=OUTPUT_TOOL, description=OUTPUT_TOOL_DESCRIPTION, parameters=output.schema)


def tool_mode_system(system: str | None) -> str:
    """The system prompt with the line that says how to answer in tool mode."""
    return f"{system}\n\n{TOOL_MODE_INSTRUCTION}" if system else TOOL_MODE_INSTRUCTION


def answer_message(message: Message) -> Message:
    """A reply that called the output tool, as the answer it gave: its thinking and the
    call's arguments as JSON text (the other parts and calls are dropped: the answer ends
    the turn). Any other reply is returned as it is."""
    call = next(
        (p for p in message.parts if isinstance(p, ToolCallPart) and p.name == OUTPUT_TOOL), None
    )
    if call is None:
        return message
    thinking = tuple(p for p in message.parts if isinstance(p, ThinkingPart))
    if INVALID_ARGUMENTS in call.arguments:  # what came was no JSON object: say so as text
        text = TextPart(text=f"<{OUTPUT_TOOL} arguments: {call.arguments[INVALID_ARGUMENTS]}>")
    else:
        text = TextPart(text=json.dumps(call.arguments, ensure_ascii=False))
    return Message(role=message.role, parts=(*thinking, text))
