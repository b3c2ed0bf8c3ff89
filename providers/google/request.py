"""Grove requests -> the Gemini `generateContent` JSON body (contents, tools, generationConfig).

Pure functions, no I/O and no event parsing (stream.py reads the replies).
"""

from __future__ import annotations

from grove.providers.base import (
    CachePoint,
    ImagePart,
    JSONObject,
    Message,
    Part,
    Request,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
)
from grove.providers.catalog import model_info
from grove.providers.errors import UnknownModelError
from grove.providers.google.stream import TEXT_SIGNATURE_DATA
from grove.providers.output import output_mode, output_tool, tool_mode_system
from grove.providers.output_dialects import for_provider
from grove.providers.thinking import google_thinking_config

# Gemini 3 rejects a model turn whose first functionCall carries no thoughtSignature. Calls
# that Gemini did not make (another provider's, before a model switch) get the value Google
# documents for exactly that case.
SIGNATURE_BYPASS = "skip_thought_signature_validator"


def build_body(request: Request) -> tuple[JSONObject, tuple[str, ...]]:
    """The request body and the warning lines to show (e.g. thinking cannot be disabled).
    A `CachePoint` naming a `cachedContents` entry stands for the system prompt, the tools and
    every part before it: the body references the entry and leaves those out (unless a typed
    answer is asked for with a final tool, which the entry does not hold)."""
    cached, messages = after_cached_content(request)
    body: JSONObject = {"contents": contents(messages, _validates_signatures(request.model))}
    system, tools = request.system, request.tools
    generation: JSONObject = {}
    if request.output is not None:
        if output_mode("google", request) == "native":
            generation["responseMimeType"] = "application/json"
            generation["responseJsonSchema"] = for_provider(request.output.schema, "google")
        else:  # Gemini 2.5 with tools: a final function the model must call
            system, tools = tool_mode_system(system), (*tools, output_tool(request.output))
            body["toolConfig"] = {"functionCallingConfig": {"mode": "ANY"}}
    if cached is not None:
        body["cachedContent"] = cached
    else:
        body.update(prefix_fields(system, tools))
    if request.max_tokens is not None:
        generation["maxOutputTokens"] = request.max_tokens
    thinking_config, warning = google_thinking_config(request.model, request.thinking)
    if thinking_config is not None:
        generation["thinkingConfig"] = thinking_config
    if generation:
        body["generationConfig"] = generation
    if request.tier == "flex":
        body["serviceTier"] = "flex"  # half price, best-effort capacity (SPEC 20)
    return body, (warning,) if warning else ()


def prefix_fields(system: str | None, tools: tuple[ToolSpec, ...]) -> JSONObject:
    """`systemInstruction` and `tools`: what a `cachedContents` entry holds besides contents."""
    fields: JSONObject = {}
    if system:
        fields["systemInstruction"] = {"parts": [{"text": system}]}
    if tools:
        fields["tools"] = [{"functionDeclarations": [declaration(t) for t in tools]}]
    return fields


def cached_content_of(request: Request) -> str | None:
    """The `cachedContents` entry the request's first fork point names, if caching is on
    (and no final tool for a typed answer changes the tools the entry holds)."""
    if request.cache is None:
        return None
    if request.output is not None and output_mode("google", request) != "native":
        return None
    for message in request.messages:
        for part in message.parts:
            if isinstance(part, CachePoint) and part.cached_content:
                return part.cached_content
    return None


def after_cached_content(request: Request) -> tuple[str | None, tuple[Message, ...]]:
    """The entry the request references and the messages after it (the parts of the message
    it ends in that follow it); without one, None and every message."""
    name = cached_content_of(request)
    if name is None:
        return None, request.messages
    for index, message in enumerate(request.messages):
        for position, part in enumerate(message.parts):
            if isinstance(part, CachePoint) and part.cached_content == name:
                rest = message.parts[position + 1 :]
                tail = (Message(role=message.role, parts=rest),) if rest else ()
                return name, tail + request.messages[index + 1 :]
    return None, request.messages


def _validates_signatures(model: str) -> bool:
    try:
        return model_info(model, "google").thinking_style == "gemini_level"
    except UnknownModelError:
        return False


def declaration(tool: ToolSpec) -> JSONObject:
    """`parametersJsonSchema` takes the tool's JSON Schema as is (`parameters` is OpenAPI)."""
    result: JSONObject = {"name": tool.name, "description": tool.description}
    if tool.parameters:
        result["parametersJsonSchema"] = tool.parameters
    return result


def contents(messages: tuple[Message, ...], needs_signatures: bool) -> list[JSONObject]:
    """One Content per message that has something Gemini can read; assistant -> `model`."""
    result: list[JSONObject] = []
    for message in messages:
        parts = _parts(message.parts)
        if message.role == "assistant" and needs_signatures:
            _sign_first_call(parts)
        if parts:
            result.append(
                {"role": "model" if message.role == "assistant" else "user", "parts": parts}
            )
    return result


def _parts(parts: tuple[Part, ...]) -> list[JSONObject]:
    result: list[JSONObject] = []
    for part in parts:
        if isinstance(part, TextPart):
            if part.text:
                result.append({"text": part.text})
        elif isinstance(part, ImagePart):
            image = part.image
            result.append({"inline_data": {"mime_type": image.media_type, "data": image.data}})
        elif isinstance(part, ThinkingPart):
            _add_thinking(part, result)
        elif isinstance(part, ToolCallPart):
            call: JSONObject = {"functionCall": {"name": part.name, "args": part.arguments}}
            if part.signature:
                call["thoughtSignature"] = part.signature
            result.append(call)
        elif isinstance(part, ToolResultPart):
            key = "error" if part.is_error else "output"
            result.append(
                {"functionResponse": {"name": part.name, "response": {key: part.content}}}
            )
            result.extend(
                {"inline_data": {"mime_type": image.media_type, "data": image.data}}
                for image in part.images
            )
    return result


def _add_thinking(part: ThinkingPart, result: list[JSONObject]) -> None:
    """Gemini's own thoughts go back with their signatures; other providers' are dropped."""
    if part.provider != "google":
        return
    if part.provider_data == TEXT_SIGNATURE_DATA:
        # A signature that came on a plain text part: back onto the text it followed.
        if not part.signature:
            return
        previous = result[-1] if result else {}
        if "text" in previous and "thought" not in previous and "thoughtSignature" not in previous:
            previous["thoughtSignature"] = part.signature
        else:
            result.append({"text": "", "thoughtSignature": part.signature})
        return
    if not part.text and not part.signature:
        return
    thought: JSONObject = {"text": part.text, "thought": True}
    if part.signature:
        thought["thoughtSignature"] = part.signature
    result.append(thought)


def _sign_first_call(parts: list[JSONObject]) -> None:
    first_call = next((p for p in parts if "functionCall" in p), None)
    if first_call is not None and "thoughtSignature" not in first_call:
        first_call["thoughtSignature"] = SIGNATURE_BYPASS
