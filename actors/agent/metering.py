"""Metering an agent's requests: about how many tokens one carries (what a budget holds and the
fleet's buckets count), what a reply was billed, and `RequestMeter`, which sends each request
past the budget's hold, the fleet's rate limits and the supervisor's word on its bill.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any, Protocol

from grove.actors.agent.batched import BatchPort, shown, step_key, waiting
from grove.actors.agent.budget_guard import BudgetPort, ReplyGuard
from grove.actors.agent.estimates import UNBILLED, estimated_bill
from grove.actors.agent.tool import Emit, Tool
from grove.actors.errors import BudgetCut
from grove.actors.telemetry import Tracing
from grove.providers.base import (
    AssistantTurn,
    Part,
    ProviderName,
    Request,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from grove.providers.errors import ProviderError
from grove.providers.output import answer_message
from grove.providers.pricing import cache_saving_usd
from grove.providers.stream_events import (
    Finished,
    Provider,
    ProviderWarning,
    RateLimitLeft,
    Retrying,
    Sending,
)

FRAMING_TOKENS = 4  # a message's role and structure, as providers count them
NO_REPLY = "the provider stream ended without a reply"
PART_FRAMING_TOKENS = 3  # a part's type tag ("tool_result", "text"), as providers count them


def context_tokens(turn: AssistantTurn) -> int:
    """The context a request carried and its reply added, as the provider reported them."""
    return turn.usage.input_tokens + turn.usage.output_tokens


def estimated_input(request: Request, tool_chars: int = 0) -> int:
    """About the input tokens of a request, on the high side (four characters a token, plus a
    few for each message's and part's framing): what a budget holds and the fleet's buckets
    count.
    `tool_chars`: the characters of the tools' names, descriptions and schemas it offers."""
    chars, parts = len(request.system or "") + tool_chars, 0
    for message in request.messages:
        chars += sum(map(part_chars, message.parts))
        parts += len(message.parts)
    framing = FRAMING_TOKENS * (len(request.messages) + 1) + PART_FRAMING_TOKENS * parts
    return chars // 4 + framing


def part_chars(part: Part) -> int:
    """The characters a message part puts in a request: its text, and a tool call's or
    result's name, id and arguments, which go with it (an image as no text)."""
    match part:
        case ToolCallPart(call_id=call_id, name=name, arguments=arguments):
            return len(call_id) + len(name) + len(json.dumps(arguments))
        case ToolResultPart(call_id=call_id, name=name, content=content):
            return len(call_id) + len(name) + len(content)
        case _:
            return len(getattr(part, "text", "") or "")


def reply_data(turn: AssistantTurn) -> dict[str, Any]:
    """What a reply was billed, as its stored data holds it (its parts aside), and what
    caching saved on it (`saved_usd`, against every prompt token at the input price), the tier
    it went on; where its request's thinking was left out after a 400, when it was."""
    data = {
        "usage": turn.usage.as_dict(),
        "cost_usd": turn.cost_usd,
        "saved_usd": cache_saving_usd(turn.model, turn.usage),
        "stop_reason": turn.stop_reason,
        "model": turn.model,
        "provider": turn.provider,
        "tier": turn.tier,
    }
    if turn.thinking_dropped is not None:
        data["thinking_dropped"] = turn.thinking_dropped
    return data


def tool_chars(tools: Iterable[Tool]) -> int:
    """The characters the tools' specs add to every request that offers them."""
    return sum(
        len(tool.spec.name) + len(tool.spec.description) + len(json.dumps(tool.spec.parameters))
        for tool in tools
    )


class FleetPort(Protocol):
    """The fleet's rate limits for the providers in `providers` (the supervisor's buckets)."""

    providers: frozenset[str]

    async def acquire(self, provider: str, tokens: int) -> None: ...

    async def release(self, provider: str, left: RateLimitLeft | None) -> None:
        """A request ended; `left`: what its answer's headers said is left on the key."""
        ...

    async def cool_down(self, uuid: str, provider: str, seconds: float) -> None: ...


@dataclass(frozen=True, slots=True)
class TurnHooks:
    """What a turn's requests are sent with: the agent's provider (built on first use), what
    must be stored before each request goes, and where its bill is told (None: nowhere)."""

    provider: Callable[[], Provider]
    stored: Callable[[], Awaitable[None]]
    tell_bill: Callable[[dict[str, Any]], Awaitable[None]]


class RequestMeter:
    """Sends one agent's requests: a budget (when its tree has one) holds room for each before
    it goes and settles it after, the fleet's limits (for the providers that have them) let
    it go, and the supervisor hears what each attempt may be billed. A request on the batch
    tier goes to the supervisor's collectors (`batch`) instead of streaming."""

    def __init__(
        self,
        uuid: str,
        budget: BudgetPort | None,
        fleet: FleetPort | None,
        tracing: Tracing,
        batch: BatchPort | None = None,
    ) -> None:
        self._uuid = uuid
        self._budget = budget
        self._fleet = fleet
        self._tracing = tracing
        self._batch = batch

    async def send(
        self, request: Request, provider: ProviderName, estimate: int, emit: Emit, hooks: TurnHooks
    ) -> AssistantTurn:
        """The reply to `request` (`estimate`: its input tokens); what streams goes to `emit`.
        On the batch tier it comes from the supervisor's collector, unless that sends it on
        the standard tier (or there is none): then it is held, priced and streamed there."""
        if request.tier == "batch":
            if self._batch is not None:
                batched = await self._metered(request, provider, estimate, emit, hooks)
                if batched is not None:
                    return batched
            request = replace(request, tier="standard")
        streamed = await self._metered(request, provider, estimate, emit, hooks)
        if streamed is None:
            raise RuntimeError(NO_REPLY)
        return streamed

    async def _metered(
        self, request: Request, provider: ProviderName, estimate: int, emit: Emit, hooks: TurnHooks
    ) -> AssistantTurn | None:
        """The reply (`_replied`) within a budget's hold at the request's tier's price, when
        the agent's tree has a budget: held before, settled after with what it used."""
        if self._budget is None:
            bill = estimated_bill(request, provider, estimate, None)
            return await self._replied(request, provider, estimate, emit, None, bill, hooks)
        hold = await self._budget.reserve(
            self._uuid, request.model, estimate, request.max_tokens, request.tier
        )
        if hold.warning:
            emit(ProviderWarning(text=hold.warning))
        if hold.strict:  # the reply may not outgrow what the request holds
            request = replace(request, max_tokens=hold.output)
        guard = (
            ReplyGuard(self._budget, self._uuid, request, hold, estimate) if hold.cancel else None
        )
        bill = estimated_bill(request, provider, estimate, hold)
        finished: AssistantTurn | None = None
        try:
            finished = await self._replied(request, provider, estimate, emit, guard, bill, hooks)
            return finished
        except BudgetCut as cut:
            finished = cut.turn
            raise
        finally:
            used = finished.usage if finished is not None else Usage()
            cost = finished.cost_usd if finished is not None else 0.0
            held = guard.hold if guard is not None else hold
            await self._budget.settle(
                self._uuid, held, used.input_tokens + used.output_tokens, cost
            )

    async def _replied(
        self,
        request: Request,
        provider: ProviderName,
        estimate: int,
        emit: Emit,
        guard: ReplyGuard | None,
        bill: dict[str, Any],
        hooks: TurnHooks,
    ) -> AssistantTurn | None:
        """A request on the batch tier from the collector (None: it goes on the standard
        tier), any other streamed."""
        if request.tier == "batch":
            return await self._batched(request, provider, emit, bill, hooks)
        return await self._streamed(request, provider, estimate, emit, guard, bill, hooks)

    async def _streamed(
        self,
        request: Request,
        provider: ProviderName,
        estimate: int,
        emit: Emit,
        guard: ReplyGuard | None,
        bill: dict[str, Any],
        hooks: TurnHooks,
    ) -> AssistantTurn:
        """The request streamed, waiting first for the fleet's rate limits if it has them
        (`estimate`: its input tokens, as the buckets count them); `guard` watches a reply
        that a budget may cut off. Just before each attempt is sent the supervisor hears what
        it may be billed at most (`bill`): the provider bills it even if this host dies before
        it reads the reply; the reply's own bill replaces that estimate, as does the word that
        an attempt failed unbilled (until a retry is sent)."""
        connect, stored, tell = hooks.provider, hooks.stored, hooks.tell_bill
        limited = self._fleet is not None and provider in self._fleet.providers
        if limited:
            assert self._fleet is not None
            await self._fleet.acquire(provider, estimate)
        left: RateLimitLeft | None = None  # what the provider's headers said is left
        try:
            await stored()  # the results this request shows the model are stored
            with self._tracing.chat(request, provider) as span:
                async for event in connect().stream(request):
                    if isinstance(event, Sending):  # an attempt goes: it may be billed
                        await tell(bill)
                        continue
                    if isinstance(event, Retrying):  # an error answer: billed nothing
                        await tell({UNBILLED: True})
                    if isinstance(event, Finished):
                        span.replied(event.turn)
                        return answered(request, event.turn)
                    if isinstance(event, RateLimitLeft):
                        left = event
                        continue
                    if limited and isinstance(event, Retrying) and "429" in event.reason:
                        assert self._fleet is not None
                        await self._fleet.cool_down(self._uuid, provider, event.delay_s)
                    emit(event)
                    if guard is not None:
                        await guard.see(event, provider)
        finally:
            if limited:
                assert self._fleet is not None
                await self._fleet.release(provider, left)
        raise RuntimeError(NO_REPLY)

    async def _batched(
        self,
        request: Request,
        provider: ProviderName,
        emit: Emit,
        bill: dict[str, Any],
        hooks: TurnHooks,
    ) -> AssistantTurn | None:
        """The reply to a request on the batch tier, from the supervisor's collector for its
        provider (no stream, no fleet limits: the vendor's batch has its own); watchers see
        the step wait, then the reply. None: it goes on the standard tier instead."""
        assert self._batch is not None
        await hooks.stored()  # the results this request shows the model are stored
        await hooks.tell_bill(bill)  # once in the batch, it may be billed
        emit(waiting(request))
        with self._tracing.chat(request, provider) as span:
            step = step_key(self._uuid, request)
            answer = await self._batch.reply(self._uuid, provider, step, request)
            if answer.error is not None:
                raise ProviderError(answer.error)
            if answer.turn is None:
                emit(ProviderWarning(text=f"── {answer.standard}: on the standard tier ──"))
                return None
            span.replied(answer.turn)
        for event in shown(answer.turn):
            emit(event)
        return answered(request, answer.turn)


def answered(request: Request, turn: AssistantTurn) -> AssistantTurn:
    """The reply as the turn takes it: with a typed output asked for, the answer given
    through the final tool is the reply's text."""
    if request.output is None:
        return turn
    return replace(turn, message=answer_message(turn.message))
