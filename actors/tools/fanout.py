"""The fan-out tools: `fork` (start a child, don't wait), `send` (mail an agent), `wait`
(collect children's answers). They only describe and forward: the supervisor rules on them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from grove.actors.agent.tool import Tool
from grove.actors.tools.todo import TODO_SPEC, reads_only
from grove.providers.base import ToolSpec

# The longest wait a user or a model may ask for: a day, in seconds.
WAIT_CAP_S = 86_400.0
FORK = ToolSpec(
    name="fork",
    description=(
        "Start a child agent that inherits this conversation and works on `prompt` in "
        "parallel. Returns the child's uuid at once, without waiting for its answer."
    ),
    parameters={
        "type": "object",
        "properties": {
            "prompt": {"type": "string", "description": "The child's task."},
            "model": {
                "type": "string",
                "description": "MODEL[/THINKING] for the child; default: this agent's model.",
            },
            "tools": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Only these of this agent's tools for the child; default: all.",
            },
            "workspace": {
                "type": "string",
                "enum": ["shared", "worktree"],
                "description": (
                    "worktree: the child works in a git worktree of its own, on a branch "
                    "named in the answer; shared: in this agent's directory. Default: the "
                    "configured one."
                ),
            },
        },
        "required": ["prompt"],
    },
)
SEND = ToolSpec(
    name="send",
    description="Mail a message to another running agent of this session.",
    parameters={
        "type": "object",
        "properties": {"uuid": {"type": "string"}, "message": {"type": "string"}},
        "required": ["uuid", "message"],
    },
)
WAIT = ToolSpec(
    name="wait",
    description=(
        "Wait up to `timeout` seconds for agents to finish; returns each one's final answer "
        "or status as JSON. Without `uuids`, waits for this agent's own children."
    ),
    parameters={
        "type": "object",
        "properties": {
            "uuids": {"type": "array", "items": {"type": "string"}},
            "timeout": {
                "type": "number",
                "minimum": 0,
                "maximum": WAIT_CAP_S,
                "description": "Seconds, default 300, at most a day.",
            },
        },
    },
)
FANOUT_TOOL_NAMES = ("fork", "send", "wait")
# The supervisor rules on these (todo too: each agent's list is kept in the store).
_SPECS = {spec.name: spec for spec in (FORK, SEND, WAIT, TODO_SPEC)}


class ToolPort(Protocol):
    """Where tool calls that touch other agents go (the supervisor)."""

    async def call(self, agent: str, tool: str, arguments: dict[str, Any]) -> str: ...


def fanout_tools(port: ToolPort, agent: str, names: tuple[str, ...]) -> dict[str, Tool]:
    """The fan-out tools among `names`, bound to `agent`."""

    def forward(tool: str) -> Callable[[dict[str, Any]], Awaitable[str]]:
        async def run(arguments: dict[str, Any]) -> str:
            return await port.call(agent, tool, arguments)

        return run

    return {
        name: Tool(
            spec=_SPECS[name],
            run=forward(name),
            idempotent=reads_only if name == TODO_SPEC.name else False,
        )
        for name in names
        if name in _SPECS
    }
