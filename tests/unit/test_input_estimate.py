"""A request's input estimate (actors/agent/metering.py estimated_input) is on the high side of
what the simulator bills for it on every wire: text, tool calls with their arguments, tool
results and the tools offered, so a request whose host died is never recorded below its bill."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from grove.actors.agent.metering import estimated_input
from grove.providers.base import (
    Message,
    Request,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
)
from grove.providers.factory import wire_for
from grove.providers.http import Endpoint
from grove.simulator.script import estimate_tokens

WIRES = [
    ("anthropic", "claude-haiku-4-5"),
    ("openai", "gpt-5-mini"),
    ("google", "gemini-2.5-flash"),
]
TOOL = ToolSpec(
    name="append",
    description="Append a line to the notes.",
    parameters={"type": "object", "properties": {"line": {"type": "string"}}},
)
words = st.text(st.characters(codec="utf-8", categories=["L", "N", "Zs"]), max_size=60)
values = st.one_of(words, st.integers(), st.booleans())


def billed_input(body: dict[str, Any], provider: str) -> int:
    """What the simulator bills as input: every string of what the request sends the model (the
    system prompt, the conversation, the tools), as each of its APIs counts them."""
    sent = [body.get(key) for key in ("system", "instructions", "systemInstruction")]
    sent += [body.get(key) for key in ("messages", "input", "contents", "tools")]
    return estimate_tokens(sent, "anthropic" if provider == "anthropic" else provider)


@pytest.mark.parametrize(("provider", "model"), WIRES)
@given(
    prompt=words,
    said=words,
    arguments=st.dictionaries(st.text(min_size=1, max_size=12), values, max_size=4),
    result=words,
    steps=st.integers(min_value=1, max_value=4),
)
def test_the_estimate_is_no_less_than_the_simulators_bill(
    provider: str,
    model: str,
    prompt: str,
    said: str,
    arguments: dict[str, Any],
    result: str,
    steps: int,
) -> None:
    messages = [Message.user(prompt or "go")]
    for step in range(steps):
        call = ToolCallPart(call_id=f"toolu_{step:024d}", name=TOOL.name, arguments=arguments)
        messages.append(Message(role="assistant", parts=(TextPart(text=said or "ok"), call)))
        answer = ToolResultPart(call_id=call.call_id, name=TOOL.name, content=result or "done")
        messages.append(Message(role="user", parts=(answer,)))
    request = Request(model=model, messages=tuple(messages), system="Be brief.", tools=(TOOL,))
    endpoint = Endpoint(base_url="http://127.0.0.1:9", api_key="sim-key-estimate-0001")
    for api in ("responses", "chat") if provider == "openai" else ("responses",):
        body = wire_for(provider, api).prepare(request, endpoint).body  # type: ignore[arg-type]
        tools = len(TOOL.name) + len(TOOL.description) + len(str(TOOL.parameters))
        assert estimated_input(request, tools) >= billed_input(body, provider), (api, body)
