"""A budgeted reply's guard (`hard_stop = "cancel"`): counts what streams in, and when the reply
outgrows what its request holds, asks the budget for more or cuts the reply off there.
"""

from __future__ import annotations

from typing import Any, Protocol

from grove.actors.errors import BudgetCut, BudgetStop
from grove.providers.base import (
    AssistantTurn,
    Message,
    ProviderName,
    Request,
    TextPart,
    Tier,
    Usage,
)
from grove.providers.pricing import cost_usd
from grove.providers.stream_events import (
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallArgumentsDelta,
)

CHARS_PER_TOKEN = 4  # how a streamed reply's tokens are estimated until usage is reported
# A reply past its hold asks for this many tokens more at a time (or half its hold, if more).
EXTEND_TOKENS = 256


class BudgetPort(Protocol):
    """The supervisor's budget checks, for an agent whose tree has a budget. A hold is the
    supervisor's record of what one request holds (supervisor/budget.py): its `output`,
    `strict`, `cancel` and `warning` are read here."""

    async def reserve(
        self, uuid: str, model: str, tokens: int, max_tokens: int | None, tier: Tier
    ) -> Any:
        """Before a request of about `tokens` input on `tier`: hold that and room for the reply
        at its price (raise BudgetStop when it would pass a limit)."""
        ...

    async def extend(self, uuid: str, model: str, hold: Any, more: int) -> Any:
        """A reply outgrew its hold: the hold with `more` reply tokens (raise BudgetStop when
        the budget has no room for them)."""
        ...

    async def settle(self, uuid: str, hold: Any, tokens: int, cost_usd: float) -> None:
        """After the request: give back the hold, count what it used."""
        ...


class ReplyGuard:
    """Watches one budgeted request's reply as it streams."""

    def __init__(
        self, port: BudgetPort, uuid: str, request: Request, hold: Any, input_tokens: int
    ) -> None:
        self.port = port
        self.uuid = uuid
        self.request = request
        self.hold = hold
        self.input_tokens = input_tokens
        self.chars = 0
        self.text: list[str] = []

    @property
    def output_tokens(self) -> int:
        return -(-self.chars // CHARS_PER_TOKEN)

    async def see(self, event: StreamEvent, provider: ProviderName) -> None:
        """Count a delta; past the hold, hold more or raise BudgetCut."""
        if isinstance(event, TextDelta):
            self.text.append(event.text)
            self.chars += len(event.text)
        elif isinstance(event, ThinkingDelta):
            self.chars += len(event.text)
        elif isinstance(event, ToolCallArgumentsDelta):
            self.chars += len(event.delta)
        else:
            return
        while self.output_tokens > self.hold.output:
            more = max(EXTEND_TOKENS, self.hold.output // 2)
            try:
                self.hold = await self.port.extend(self.uuid, self.request.model, self.hold, more)
            except BudgetStop as stop:
                raise BudgetCut(f"{stop} (the reply was cut off)", self.cut(provider)) from None

    def cut(self, provider: ProviderName) -> AssistantTurn:
        """What streamed until the cut, as a reply whose usage is estimated."""
        usage = Usage(input_tokens=self.input_tokens, output_tokens=self.output_tokens)
        return AssistantTurn(
            provider=provider,
            model=self.request.model,
            message=Message(role="assistant", parts=(TextPart(text="".join(self.text)),)),
            usage=usage,
            stop_reason="budget",
            cost_usd=cost_usd(self.request.model, usage, tier=self.request.tier),
        )
