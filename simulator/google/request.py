"""What a generateContent request asks, read as the Gemini API reads it (camelCase or snake_case
fields): its prompt and script steps, declared functions, thinking settings, a typed answer.
"""

from __future__ import annotations

import json
from typing import Any

from grove.simulator.script import Entry, Structured
from grove.simulator.wire import InvalidRequest


def field(container: object, camel: str, snake: str) -> Any:
    """A field by its JSON (camelCase) or proto (snake_case) name; the API accepts both."""
    if not isinstance(container, dict):
        return None
    return container.get(camel, container.get(snake))


def last_user_prompt(contents: list[dict[str, Any]]) -> str:
    """The last user content's text, or its function responses when it holds only those."""
    for content in reversed(contents):
        if content.get("role", "user") != "user":
            continue
        text = user_text(content)
        if text is not None:
            return text
        parts: list[dict[str, Any]] = content.get("parts") or []
        responses = [field(part, "functionResponse", "function_response") for part in parts]
        return "\n".join(
            json.dumps(field(response, "response", "response"), ensure_ascii=False)
            for response in responses
            if response is not None
        )
    return ""


def entry_of(content: dict[str, Any]) -> tuple[Entry, str] | None:
    """Model contents are replies; a user content is text when it has a text part, else it
    holds results (function responses)."""
    role = content.get("role", "user")
    if role == "model":
        return "reply", ""
    if role != "user":
        return None
    text = user_text(content)
    return ("results", "") if text is None else ("text", text)


def user_text(content: dict[str, Any]) -> str | None:
    """A user content's text parts joined, or None when it has none."""
    parts: list[dict[str, Any]] = content.get("parts") or []
    texts = [str(part["text"]) for part in parts if "text" in part]
    return "\n".join(texts) if texts else None


def structured_of(
    model: str, body: dict[str, Any], tools: list[dict[str, Any]]
) -> Structured | None:
    """Function calling in mode ANY (the first allowed function, else the last declared),
    else a JSON answer (`responseMimeType` application/json, with `responseJsonSchema` or
    the OpenAPI-style `responseSchema`). Gemini 2.5 refuses JSON answers with functions."""
    declarations = {
        str(declaration.get("name")): declaration
        for tool in tools
        for declaration in field(tool, "functionDeclarations", "function_declarations") or []
    }
    calling = field(
        field(body, "toolConfig", "tool_config"),
        "functionCallingConfig",
        "function_calling_config",
    )
    if field(calling, "mode", "mode") == "ANY" and declarations:
        allowed = field(calling, "allowedFunctionNames", "allowed_function_names") or []
        name = str(allowed[0]) if allowed else list(declarations)[-1]
        declaration = declarations.get(name, {})
        schema = field(declaration, "parametersJsonSchema", "parameters_json_schema")
        if schema is None:
            schema = openapi_to_json_schema(field(declaration, "parameters", "parameters"))
        return Structured(schema=schema if isinstance(schema, dict) else {}, tool=name)
    config = field(body, "generationConfig", "generation_config")
    if field(config, "responseMimeType", "response_mime_type") != "application/json":
        return None
    if declarations and model.startswith("gemini-2"):
        raise InvalidRequest(
            "Function calling with a response mime type: 'application/json' is unsupported"
        )
    schema = field(config, "responseJsonSchema", "response_json_schema")
    if schema is None:
        schema = openapi_to_json_schema(field(config, "responseSchema", "response_schema"))
    return Structured(schema=schema if isinstance(schema, dict) else {"type": "object"})


def openapi_to_json_schema(schema: Any) -> Any:
    """Gemini's OpenAPI-style Schema (`"type": "OBJECT"`, `nullable`) as JSON Schema."""
    if isinstance(schema, list):
        return [openapi_to_json_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    converted = {
        key: openapi_to_json_schema(value) for key, value in schema.items() if key != "nullable"
    }
    kind = converted.get("type")
    if isinstance(kind, str):
        converted["type"] = kind.lower()
        if schema.get("nullable") is True:
            converted["type"] = [kind.lower(), "null"]
    if "any_of" in converted:
        converted["anyOf"] = converted.pop("any_of")
    return converted


def declared_names(tools: list[dict[str, Any]]) -> list[str]:
    names: list[str] = []
    for tool in tools:
        declarations = field(tool, "functionDeclarations", "function_declarations") or []
        names += [str(declaration.get("name")) for declaration in declarations]
    return names


def thinking_settings(body: dict[str, Any]) -> dict[str, Any]:
    """The request's `thinkingConfig` fields that are set, by their JSON names."""
    config = field(
        field(body, "generationConfig", "generation_config"), "thinkingConfig", "thinking_config"
    )
    fields = {
        "includeThoughts": field(config, "includeThoughts", "include_thoughts"),
        "thinkingBudget": field(config, "thinkingBudget", "thinking_budget"),
        "thinkingLevel": field(config, "thinkingLevel", "thinking_level"),
    }
    return {name: value for name, value in fields.items() if value is not None}


def thinking_requested(body: dict[str, Any]) -> bool:
    settings = thinking_settings(body)
    if settings.get("includeThoughts") is not True:
        return False
    level = settings.get("thinkingLevel")
    return settings.get("thinkingBudget") != 0 and str(level).lower() != "minimal"
