"""The `Provider` protocol and the events its stream yields: content deltas, usage, rate
limits, retries and the assembled reply at the end, frozen dataclasses told apart by `kind`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Literal, Protocol

from grove.providers.base import AssistantTurn, JSONObject, ProviderName, Request, Usage

# `index` identifies one content part of the reply; every event with the same index builds
# the same part. Wire modules emit these; `accumulate.TurnAccumulator` assembles the reply.


@dataclass(frozen=True, kw_only=True, slots=True)
class TextDelta:
    index: int
    text: str
    kind: Literal["text_delta"] = "text_delta"


@dataclass(frozen=True, kw_only=True, slots=True)
class ThinkingDelta:
    index: int
    text: str
    kind: Literal["thinking_delta"] = "thinking_delta"


@dataclass(frozen=True, kw_only=True, slots=True)
class ThinkingSignature:
    """A signature (or opaque provider data) that closes a thinking part."""

    index: int
    signature: str | None = None
    provider_data: JSONObject | None = None
    kind: Literal["thinking_signature"] = "thinking_signature"


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolCallStart:
    index: int
    call_id: str
    name: str
    signature: str | None = None
    kind: Literal["tool_call_start"] = "tool_call_start"


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolCallArgumentsDelta:
    """A fragment of the JSON text of a tool call's arguments."""

    index: int
    delta: str
    kind: Literal["tool_call_arguments_delta"] = "tool_call_arguments_delta"


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolCallArguments:
    """A tool call's complete arguments, when the wire sends them parsed (Gemini)."""

    index: int
    arguments: JSONObject
    kind: Literal["tool_call_arguments"] = "tool_call_arguments"


@dataclass(frozen=True, kw_only=True, slots=True)
class UsageUpdate:
    """The usage so far: `native` is the provider's own object, `usage` Grove's reading."""

    usage: Usage
    native: JSONObject
    kind: Literal["usage"] = "usage"


@dataclass(frozen=True, kw_only=True, slots=True)
class RateLimitLeft:
    """What the provider's rate-limit headers say is left on the key (None: not said)."""

    requests: int | None
    tokens: int | None
    kind: Literal["rate_limit"] = "rate_limit"


@dataclass(frozen=True, kw_only=True, slots=True)
class ResponseInfo:
    response_id: str | None = None
    model: str | None = None
    kind: Literal["response_info"] = "response_info"


@dataclass(frozen=True, kw_only=True, slots=True)
class StopReason:
    """The provider-native stop value (Anthropic stop_reason, Gemini finishReason, ...)."""

    reason: str
    kind: Literal["stop_reason"] = "stop_reason"


@dataclass(frozen=True, kw_only=True, slots=True)
class Completed:
    """The API's own terminal signal arrived: the reply is complete."""

    kind: Literal["completed"] = "completed"


@dataclass(frozen=True, kw_only=True, slots=True)
class Retrying:
    """Emitted by the provider base before it retries a failed attempt."""

    attempt: int
    delay_s: float
    reason: str
    kind: Literal["retrying"] = "retrying"


@dataclass(frozen=True, kw_only=True, slots=True)
class Sending:
    """Emitted by the provider base just before each attempt is sent, its body made (whoever
    counts the requests that may be billed counts it from here)."""

    attempt: int
    kind: Literal["sending"] = "sending"


@dataclass(frozen=True, kw_only=True, slots=True)
class ProviderWarning:
    text: str
    kind: Literal["warning"] = "warning"


@dataclass(frozen=True, kw_only=True, slots=True)
class Finished:
    """The last event of `Provider.stream`: the reply assembled, usage and cost."""

    turn: AssistantTurn
    kind: Literal["finished"] = "finished"


StreamEvent = (
    TextDelta
    | ThinkingDelta
    | ThinkingSignature
    | ToolCallStart
    | ToolCallArgumentsDelta
    | ToolCallArguments
    | UsageUpdate
    | RateLimitLeft
    | ResponseInfo
    | StopReason
    | Completed
    | Retrying
    | Sending
    | ProviderWarning
    | Finished
)

CONTENT_EVENT_KINDS = frozenset(
    {
        "text_delta",
        "thinking_delta",
        "tool_call_start",
        "tool_call_arguments_delta",
        "tool_call_arguments",
    }
)


class Provider(Protocol):
    """One agent's connection to one provider. Never shared between agents."""

    name: ProviderName

    def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        """Stream one reply, ending with `Finished`; retries before content are internal."""
        ...

    async def complete(self, request: Request) -> AssistantTurn:
        """Stream one reply to its end and return it assembled."""
        ...

    async def aclose(self) -> None: ...
