"""Wire-neutral request, message, usage and reply types (the `Provider` protocol and its
stream's events are stream_events.py's); nothing here knows any vendor's JSON.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

ProviderName = Literal["anthropic", "openai", "google"]
ThinkingLevel = Literal["none", "low", "med", "high"]
# The price tier a request is sent on (SPEC 20): the vendor's ordinary endpoint, its flex
# tier (OpenAI, Gemini), or its batch API, both at the batch discount.
Tier = Literal["standard", "flex", "batch"]
TIERS: tuple[Tier, ...] = ("standard", "flex", "batch")
THINKING_LEVELS: tuple[ThinkingLevel, ...] = ("none", "low", "med", "high")

JSONObject = dict[str, Any]


# --- conversation parts -------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class TextPart:
    text: str
    kind: Literal["text"] = "text"


@dataclass(frozen=True, kw_only=True, slots=True)
class ThinkingPart:
    """Reasoning the model showed. `signature` (Anthropic, Gemini) and `provider_data`
    (Anthropic redacted thinking, OpenAI reasoning items) are kept to be sent back. A block
    bound to its prefix (preserved thinking) keeps the `model` that made it and the
    fingerprint of its `prefix` (providers/preserved_thinking.py)."""

    text: str
    signature: str | None = None
    provider: ProviderName | None = None
    provider_data: JSONObject | None = None
    model: str | None = None
    prefix: str | None = None
    kind: Literal["thinking"] = "thinking"


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolCallPart:
    call_id: str
    name: str
    arguments: JSONObject
    signature: str | None = None
    kind: Literal["tool_call"] = "tool_call"


@dataclass(frozen=True, kw_only=True, slots=True)
class ImageData:
    """An image a tool returned: its media type (`image/png`) and base64 data."""

    media_type: str
    data: str

    @property
    def data_url(self) -> str:
        return f"data:{self.media_type};base64,{self.data}"


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolResultPart:
    """A tool's answer: its text, and the images it returned, if any."""

    call_id: str
    name: str
    content: str
    is_error: bool = False
    images: tuple[ImageData, ...] = ()
    kind: Literal["tool_result"] = "tool_result"


@dataclass(frozen=True, kw_only=True, slots=True)
class ImagePart:
    """An image in a user message (history printed on frames by a compaction, say)."""

    image: ImageData
    kind: Literal["image"] = "image"


@dataclass(frozen=True, kw_only=True, slots=True)
class CachePoint:
    """A mark after the part before it: what comes up to here is shared (a fork point), worth
    a provider's cache. `key` names the shared prefix, the same for every agent that shares
    it; `cached_content` names a provider-side copy of everything up to here (a Gemini
    `cachedContents` entry), which the request then references instead of sending it. Wire
    modules render or skip these; they are never stored."""

    key: str
    cached_content: str | None = None
    kind: Literal["cache_point"] = "cache_point"


Part = TextPart | ThinkingPart | ToolCallPart | ToolResultPart | ImagePart | CachePoint


@dataclass(frozen=True, kw_only=True, slots=True)
class Message:
    """One conversation turn. Tool results travel in a `user` message."""

    role: Literal["user", "assistant"]
    parts: tuple[Part, ...]

    @classmethod
    def user(cls, text: str) -> Message:
        return cls(role="user", parts=(TextPart(text=text),))

    @property
    def text(self) -> str:
        return "".join(part.text for part in self.parts if isinstance(part, TextPart))


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolSpec:
    name: str
    description: str
    parameters: JSONObject


CacheTTL = Literal["5m", "1h"]
CACHE_TTL_SECONDS: dict[CacheTTL, int] = {"5m": 300, "1h": 3600}


@dataclass(frozen=True, kw_only=True, slots=True)
class CachePolicy:
    """How a request asks for provider caching (`[cache]`): how long entries should live."""

    ttl: CacheTTL = "5m"

    @property
    def seconds(self) -> int:
        return CACHE_TTL_SECONDS[self.ttl]


# How many times a malformed typed answer goes back to the model, by default and at most.
DEFAULT_OUTPUT_RETRIES = 2
MAX_OUTPUT_RETRIES = 20


@dataclass(frozen=True, kw_only=True, slots=True)
class OutputSchema:
    """A typed answer asked of the model: JSON matching `schema` (a JSON Schema whose root
    is an object), known to the model as `name`. Each wire asks for it its own way."""

    name: str
    schema: JSONObject


@dataclass(frozen=True, kw_only=True, slots=True)
class Request:
    """What an agent asks of a model. `thinking=None` means the provider's own default;
    `cache=None` asks for no caching (its `CachePoint`s are then left out); `output`, when
    set, asks for the final answer as JSON of that schema; `tier` is the price tier it goes on."""

    model: str
    messages: tuple[Message, ...]
    system: str | None = None
    tools: tuple[ToolSpec, ...] = ()
    thinking: ThinkingLevel | None = None
    max_tokens: int | None = None
    cache: CachePolicy | None = None
    output: OutputSchema | None = None
    tier: Tier = "standard"


# --- usage ----------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class Usage:
    """Tokens of one request, alike for every provider: `input_tokens` counts the whole
    prompt, those read from a cache (`cache_read_tokens`) and written to one
    (`cache_write_tokens`, of which `cache_write_1h_tokens` for an hour) included; thinking
    tokens are counted within `output_tokens` too."""

    input_tokens: int = 0
    output_tokens: int = 0
    thinking_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cache_write_1h_tokens: int = 0

    @property
    def uncached_input_tokens(self) -> int:
        """Prompt tokens neither read from a cache nor written to one."""
        return max(self.input_tokens - self.cache_read_tokens - self.cache_write_tokens, 0)

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            thinking_tokens=self.thinking_tokens + other.thinking_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            cache_write_1h_tokens=self.cache_write_1h_tokens + other.cache_write_1h_tokens,
        )

    def as_dict(self) -> dict[str, int]:
        """The counts; the hour-long writes only when there are some."""
        counts = {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "thinking_tokens": self.thinking_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
        }
        if self.cache_write_1h_tokens:
            counts["cache_write_1h_tokens"] = self.cache_write_1h_tokens
        return counts


# --- the assembled reply -------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class AssistantTurn:
    """One complete model reply: the message to store and what it cost."""

    provider: ProviderName
    model: str
    message: Message
    usage: Usage
    native_usage: JSONObject = field(default_factory=dict)
    stop_reason: str | None = None
    response_id: str | None = None
    cost_usd: float = 0.0
    warnings: tuple[str, ...] = ()
    # Where the request's thinking was left out after a 400 said it was bound to a different
    # conversation (providers/preserved_thinking.py); None when it was not.
    thinking_dropped: str | None = None
    tier: Tier = "standard"  # the price tier it was served and priced on

    @property
    def text(self) -> str:
        return self.message.text

    @property
    def thinking_text(self) -> str:
        return "".join(p.text for p in self.message.parts if isinstance(p, ThinkingPart))

    @property
    def tool_calls(self) -> tuple[ToolCallPart, ...]:
        return tuple(p for p in self.message.parts if isinstance(p, ToolCallPart))
