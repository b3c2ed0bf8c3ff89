"""What a Messages request asks, read and checked as the Anthropic API does: its prompt, script
steps, thinking, forced tool or output format, and cache breakpoints (the parts of `Inbound`).
"""

from __future__ import annotations

from typing import Any

from grove.simulator.caching import Breakpoint, PromptPrefixes, block_points
from grove.simulator.schema_rules import closed_objects_problem
from grove.simulator.script import Entry, Structured
from grove.simulator.wire import InvalidRequest, content_text, objects

MIN_THINKING_BUDGET = 1024
# `between_tools`: no thinking before the answer, only short notes between tool calls.
THINKING_TYPES = ("enabled", "disabled", "adaptive", "between_tools")
MAX_BREAKPOINTS = 4
CACHE_TTLS = ("5m", "1h")


def prompt_prefixes(
    body: dict[str, Any],
    tools: list[dict[str, Any]],
    messages: list[dict[str, Any]],
    *,
    refuse_cache_control: bool,
) -> PromptPrefixes:
    """The prompt's blocks in the order the cache reads them (tools, system, messages)
    and its `cache_control` breakpoints; InvalidRequest for more than four, a TTL the API
    does not know, or an hour-long one after a five-minute one."""
    blocks: list[tuple[str, dict[str, Any], str]] = [
        ("tools", tool, f"tools.{index}") for index, tool in enumerate(tools)
    ]
    system = body.get("system")
    if isinstance(system, str):
        blocks.append(("system", {"type": "text", "text": system}, "system"))
    else:
        blocks += [
            ("system", block, f"system.{index}")
            for index, block in enumerate(objects(system, "system"))
        ]
    for number, message in enumerate(messages):
        content = message["content"]
        if isinstance(content, str):
            blocks.append((message["role"], {"type": "text", "text": content}, ""))
        else:
            blocks += [
                (message["role"], block, f"messages.{number}.content.{index}")
                for index, block in enumerate(content)
            ]
    marks = [
        Breakpoint(index=index, ttl=cache_ttl(block["cache_control"], where))
        for index, (_, block, where) in enumerate(blocks)
        if block.get("cache_control") is not None
    ]
    automatic = body.get("cache_control")
    if automatic is not None and blocks:
        marks.append(Breakpoint(index=len(blocks) - 1, ttl=cache_ttl(automatic, "")))
    if marks and refuse_cache_control:
        where = next((w for _, b, w in blocks if "cache_control" in b), "") or "body"
        raise InvalidRequest(f"{where}.cache_control: Extra inputs are not permitted")
    if len(marks) > MAX_BREAKPOINTS:
        raise InvalidRequest(
            f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
            f"Found {len(marks)}."
        )
    ttls = [mark.ttl for mark in sorted(marks, key=lambda mark: mark.index)]
    if "5m" in ttls and "1h" in ttls[ttls.index("5m") :]:
        raise InvalidRequest(
            "a ttl='1h' cache_control block must not come after a ttl='5m' cache_control "
            "block. Note that blocks are processed in the following order: `tools`, "
            "`system`, `messages`."
        )
    points = block_points((role, block) for role, block, _ in blocks)
    return PromptPrefixes(points=points, breakpoints=tuple(marks))


def structured_of(body: dict[str, Any], tools: list[dict[str, Any]]) -> Structured | None:
    """A forced tool (`tool_choice` tool, or any: the last tool), else `output_config.format`
    (or the beta's `output_format`) with its schema, else None."""
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") in ("tool", "any") and tools:
        name = choice.get("name") if choice["type"] == "tool" else tools[-1].get("name")
        tool = next((t for t in tools if t.get("name") == name), None)
        if tool is None:
            raise InvalidRequest(f"tool_choice.name: no tool named {name!r} in tools")
        schema = tool.get("input_schema")
        return Structured(schema=schema if isinstance(schema, dict) else {}, tool=str(name))
    config = body.get("output_config")
    given = [
        ("output_config.format", config.get("format") if isinstance(config, dict) else None),
        ("output_format", body.get("output_format")),
    ]
    for field, form in given:
        if form is None:
            continue
        if not isinstance(form, dict) or form.get("type") != "json_schema":
            raise InvalidRequest(f"{field}.type: Input should be 'json_schema'")
        problem = closed_objects_problem(form.get("schema"), f"{field}.schema")
        if problem is not None:
            raise InvalidRequest(problem)
        return Structured(schema=form["schema"])
    return None


def last_user_prompt(messages: list[dict[str, Any]]) -> str:
    """The last user message's text, or its tool results' text when it holds only those."""
    for message in reversed(messages):
        if message["role"] != "user":
            continue
        text = user_text(message["content"])
        if text is not None:
            return text
        return "\n".join(
            content_text(b.get("content"))
            for b in message["content"]
            if b.get("type") == "tool_result"
        )
    return ""


def entry_of(message: dict[str, Any]) -> tuple[Entry, str]:
    if message["role"] == "assistant":
        return "reply", ""
    text = user_text(message["content"])
    return ("results", "") if text is None else ("text", text)


def user_text(content: str | list[dict[str, Any]]) -> str | None:
    """A user message's own text (its text blocks), or None when it has no text block."""
    if isinstance(content, str):
        return content
    texts = [str(b.get("text", "")) for b in content if b.get("type") == "text"]
    return "\n".join(texts) if texts else None


def thinking_requested(thinking: object, max_tokens: int) -> bool:
    if thinking is None:
        return False
    if not isinstance(thinking, dict) or thinking.get("type") not in THINKING_TYPES:
        raise InvalidRequest(
            "thinking.type: Input should be 'enabled', 'disabled', 'adaptive' or 'between_tools'"
        )
    if thinking["type"] != "enabled":
        return bool(thinking["type"] == "adaptive")
    budget = thinking.get("budget_tokens")
    if not isinstance(budget, int) or isinstance(budget, bool) or budget < MIN_THINKING_BUDGET:
        raise InvalidRequest(
            "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
        )
    if max_tokens <= budget:
        raise InvalidRequest("`max_tokens` must be greater than `thinking.budget_tokens`.")
    return True


def cache_ttl(control: object, where: str) -> str:
    prefix = f"{where}.cache_control" if where else "cache_control"
    if not isinstance(control, dict) or control.get("type") != "ephemeral":
        raise InvalidRequest(f"{prefix}.type: Input should be 'ephemeral'")
    ttl = control.get("ttl", "5m")
    if ttl not in CACHE_TTLS:
        raise InvalidRequest(f"{prefix}.ttl: Input should be '5m' or '1h'")
    return str(ttl)
