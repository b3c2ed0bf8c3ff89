"""`Agent`: one model-backed actor: private mailbox, private state, its own provider instance.

The turn loop runs model steps, tool calls and step boundaries; it knows nothing of the
tree or the store (the supervisor hands it history and takes its results).
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from actors.transcript import entry_to_message, parts_to_data
from providers.base import (
    AssistantTurn,
    Finished,
    Message,
    Provider,
    ProviderName,
    Request,
    StreamEvent,
    ThinkingLevel,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
    Usage,
)
from providers.secrets import mask

MAX_STEPS_PER_TURN = 50


class AgentState(enum.Enum):
    IDLE = "idle"
    IN_TURN = "in_turn"
    STOPPED = "stopped"


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelChoice:
    provider: ProviderName
    model: str
    thinking: ThinkingLevel | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Tool:
    """A tool an agent may call: its schema and the coroutine that runs it."""

    spec: ToolSpec
    run: Callable[[dict[str, Any]], Awaitable[str]]


@dataclass(frozen=True, kw_only=True, slots=True)
class NewEntry:
    """A message the turn produced, for the supervisor to persist."""

    kind: str
    content: str
    data: dict[str, Any]


@dataclass(kw_only=True, slots=True)
class TurnResult:
    entries: list[NewEntry] = field(default_factory=list)
    text: str = ""
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    stop_reason: str | None = None
    error: str | None = None
    cancelled: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None and not self.cancelled


ProviderFactory = Callable[[ModelChoice], Provider]
Emit = Callable[[StreamEvent], None]


class Agent:
    """Turn-based: one turn at a time; steering waits for the next step boundary."""

    def __init__(
        self,
        uuid: str,
        choice: ModelChoice | None,
        history: list[Message],
        make_provider: ProviderFactory,
        *,
        system: str | None = None,
        tools: dict[str, Tool] | None = None,
        max_tokens: int | None = None,
    ) -> None:
        self.uuid = uuid
        self.choice = choice
        self.history = history
        self.system = system
        self.tools = tools or {}
        self.max_tokens = max_tokens
        self.state = AgentState.IDLE
        self._make_provider = make_provider
        self._provider: Provider | None = None
        self._steering: list[NewEntry] = []

    @property
    def provider(self) -> Provider:
        """This agent's own provider instance, created on the first request."""
        if self._provider is None:
            if self.choice is None:
                raise RuntimeError("agent has no model")
            self._provider = self._make_provider(self.choice)
        return self._provider

    @property
    def has_provider(self) -> bool:
        return self._provider is not None

    async def switch_model(self, choice: ModelChoice) -> None:
        """Drop the provider instance; the next request builds one for the new model."""
        provider, self._provider = self._provider, None
        self.choice = choice
        if provider is not None:
            await provider.aclose()

    async def release_connections(self) -> None:
        """Idle: let go of the provider's connection pool (it is rebuilt on next use)."""
        if self._provider is not None:
            release = getattr(self._provider, "release", None)
            if release is not None:
                await release()

    def steer(self, entry: NewEntry) -> None:
        """Queue a message to be injected at the next step boundary."""
        self._steering.append(entry)

    def reset_history(self, history: list[Message]) -> None:
        self.history = history

    async def run_turn(self, user: NewEntry | None, emit: Emit) -> TurnResult:
        """Run one turn to its end. Failures are reported in the result, never raised."""
        result = TurnResult()
        self.state = AgentState.IN_TURN
        try:
            if user is not None:
                self._append(result, user, entry_to_message(user))
            self._inject_steering(result)
            for _ in range(MAX_STEPS_PER_TURN):
                turn = await self._step(emit)
                self._record_assistant(result, turn)
                calls = turn.tool_calls
                if calls:
                    await self._run_tools(result, calls)
                steered = self._inject_steering(result)
                if not calls and not steered:
                    break
        except asyncio.CancelledError:
            result.cancelled = True
            result.error = "cancelled"
        except Exception as exc:  # a failed turn is a result, not a crash of the host
            result.error = mask(str(exc)) or type(exc).__name__
        finally:
            self.state = AgentState.IDLE
        return result

    async def _step(self, emit: Emit) -> AssistantTurn:
        assert self.choice is not None
        request = Request(
            model=self.choice.model,
            messages=tuple(self.history),
            system=self.system,
            tools=tuple(tool.spec for tool in self.tools.values()),
            thinking=self.choice.thinking,
            max_tokens=self.max_tokens,
        )
        async for event in self.provider.stream(request):
            if isinstance(event, Finished):
                return event.turn
            emit(event)
        raise RuntimeError("the provider stream ended without a reply")

    def _record_assistant(self, result: TurnResult, turn: AssistantTurn) -> None:
        data = {
            "parts": parts_to_data(turn.message.parts),
            "usage": turn.usage.as_dict(),
            "cost_usd": turn.cost_usd,
            "stop_reason": turn.stop_reason,
            "model": turn.model,
            "provider": turn.provider,
        }
        self._append(result, NewEntry(kind="assistant", content=turn.text, data=data), turn.message)
        result.text = turn.text
        result.usage = result.usage + turn.usage
        result.cost_usd += turn.cost_usd
        result.stop_reason = turn.stop_reason

    async def _run_tools(self, result: TurnResult, calls: tuple[ToolCallPart, ...]) -> None:
        parts = await asyncio.gather(*(self._run_tool(call) for call in calls))
        message = Message(role="user", parts=tuple(parts))
        entry = NewEntry(kind="tool_result", content="", data={"parts": parts_to_data(parts)})
        self._append(result, entry, message)

    async def _run_tool(self, call: ToolCallPart) -> ToolResultPart:
        tool = self.tools.get(call.name)
        if tool is None:
            return ToolResultPart(
                call_id=call.call_id,
                name=call.name,
                content=f"unknown tool: {call.name}",
                is_error=True,
            )
        try:
            output = await tool.run(call.arguments)
        except Exception as exc:  # the model is told, the turn goes on
            return ToolResultPart(
                call_id=call.call_id, name=call.name, content=mask(f"error: {exc}"), is_error=True
            )
        return ToolResultPart(call_id=call.call_id, name=call.name, content=output)

    def _inject_steering(self, result: TurnResult) -> bool:
        """Add queued messages to the history; True when one of them asks for another step
        (steering interrupts; side messages such as advisor asides do not)."""
        queued, self._steering = self._steering, []
        for entry in queued:
            self._append(result, entry, entry_to_message(entry))
        return any(entry.kind == "steering" for entry in queued)

    def _append(self, result: TurnResult, entry: NewEntry, message: Message | None) -> None:
        result.entries.append(entry)
        if message is None or not message.parts:
            return
        if self.history and self.history[-1].role == message.role:
            previous = self.history.pop()
            message = Message(role=message.role, parts=previous.parts + message.parts)
        self.history.append(message)


def user_entry(text: str) -> NewEntry:
    return NewEntry(kind="user", content=text, data={})
