"""The one delta accumulator: builds a complete assistant reply from Grove stream events.

Wire modules only translate their vendor's events; assembly, ordering and JSON parsing of
streamed tool arguments happen here, once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from grove.providers import wirejson
from grove.providers.base import (
    AssistantTurn,
    JSONObject,
    Message,
    Part,
    ProviderName,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    Usage,
)
from grove.providers.errors import ProviderProtocolError
from grove.providers.stream_events import (
    Completed,
    ProviderWarning,
    ResponseInfo,
    StopReason,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ThinkingSignature,
    ToolCallArguments,
    ToolCallArgumentsDelta,
    ToolCallStart,
    UsageUpdate,
)

# The key under which a tool call whose arguments were not a JSON object says why.
INVALID_ARGUMENTS = "__invalid_arguments__"


@dataclass(slots=True)
class _PartBuilder:
    kind: str
    chunks: list[str] = field(default_factory=list)
    signature: str | None = None
    provider_data: JSONObject | None = None
    call_id: str = ""
    name: str = ""
    arguments: JSONObject | None = None


def parse_arguments(raw: str) -> JSONObject:
    """Parse streamed tool arguments; an empty string is an empty object. Text that is not a
    JSON object is not the stream's fault but the model's: the call keeps its reason under
    INVALID_ARGUMENTS, so the agent answers it with an error the model can act on."""
    if not raw.strip():
        return {}
    try:
        value: Any = wirejson.loads(raw)
    except (ValueError, RecursionError) as exc:
        return {INVALID_ARGUMENTS: f"not valid JSON ({exc})"}
    if not isinstance(value, dict):
        return {INVALID_ARGUMENTS: f"a JSON {type(value).__name__}, not an object"}
    return value


class TurnAccumulator:
    """Feed every event of one attempt; `turn()` returns the assembled reply."""

    def __init__(self, provider: ProviderName, model: str) -> None:
        self.provider: ProviderName = provider
        self.model = model
        self._parts: dict[int, _PartBuilder] = {}
        self.usage = Usage()
        self.native_usage: JSONObject = {}
        self.stop_reason: str | None = None
        self.response_id: str | None = None
        self.completed = False
        self.content_seen = False
        self.warnings: list[str] = []

    def add(self, event: StreamEvent) -> None:
        match event:
            case TextDelta(index=index, text=text):
                self._builder(index, "text").chunks.append(text)
                self.content_seen = True
            case ThinkingDelta(index=index, text=text):
                self._builder(index, "thinking").chunks.append(text)
                self.content_seen = True
            case ThinkingSignature(index=index, signature=signature, provider_data=data):
                builder = self._builder(index, "thinking")
                builder.signature = signature or builder.signature
                builder.provider_data = data or builder.provider_data
            case ToolCallStart(index=index, call_id=call_id, name=name, signature=signature):
                builder = self._builder(index, "tool_call")
                builder.call_id, builder.name, builder.signature = call_id, name, signature
                self.content_seen = True
            case ToolCallArgumentsDelta(index=index, delta=delta):
                self._builder(index, "tool_call").chunks.append(delta)
            case ToolCallArguments(index=index, arguments=arguments):
                self._builder(index, "tool_call").arguments = arguments
            case UsageUpdate(usage=usage, native=native):
                self.usage, self.native_usage = usage, native
            case ResponseInfo(response_id=response_id, model=model):
                self.response_id = response_id or self.response_id
                self.model = model or self.model
            case StopReason(reason=reason):
                self.stop_reason = reason
            case Completed():
                self.completed = True
            case ProviderWarning(text=text):
                self.warnings.append(text)
            case _:
                pass

    def _builder(self, index: int, kind: str) -> _PartBuilder:
        builder = self._parts.get(index)
        if builder is None:
            builder = self._parts[index] = _PartBuilder(kind=kind)
        elif builder.kind != kind:
            raise ProviderProtocolError(
                f"content part {index} changed from {builder.kind} to {kind}"
            )
        return builder

    @property
    def text(self) -> str:
        return "".join(
            "".join(b.chunks) for _, b in sorted(self._parts.items()) if b.kind == "text"
        )

    @property
    def thinking(self) -> str:
        return "".join(
            "".join(b.chunks) for _, b in sorted(self._parts.items()) if b.kind == "thinking"
        )

    def raw_tool_calls(self) -> list[tuple[str, str, JSONObject | None]]:
        """Each tool call so far as (name, streamed argument text, parsed arguments or None)."""
        return [
            (b.name, "".join(b.chunks), b.arguments)
            for _, b in sorted(self._parts.items())
            if b.kind == "tool_call"
        ]

    def parts(self) -> tuple[Part, ...]:
        parts: list[Part] = []
        for _, builder in sorted(self._parts.items()):
            if builder.kind == "text":
                parts.append(TextPart(text="".join(builder.chunks)))
            elif builder.kind == "thinking":
                parts.append(
                    ThinkingPart(
                        text="".join(builder.chunks),
                        signature=builder.signature,
                        provider=self.provider,
                        provider_data=builder.provider_data,
                    )
                )
            else:
                arguments = builder.arguments
                if arguments is None:
                    arguments = parse_arguments("".join(builder.chunks))
                parts.append(
                    ToolCallPart(
                        call_id=builder.call_id,
                        name=builder.name,
                        arguments=arguments,
                        signature=builder.signature,
                    )
                )
        return tuple(parts)

    def turn(self, cost_usd: float = 0.0) -> AssistantTurn:
        return AssistantTurn(
            provider=self.provider,
            model=self.model,
            message=Message(role="assistant", parts=self.parts()),
            usage=self.usage,
            native_usage=self.native_usage,
            stop_reason=self.stop_reason,
            response_id=self.response_id,
            cost_usd=cost_usd,
            warnings=tuple(self.warnings),
        )
