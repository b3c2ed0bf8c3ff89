"""What a host asks of the supervisor, through `RayProxy[SupervisorAPI]`: the gates a request
passes (fleet limits, budget), the tools it forwards, and the records it sends up.

Behaviour, not plumbing: batching (actors/coalesce.py), waiting and asking again, refusals
raised as the errors the turn loop knows. No Ray call here goes around the proxy.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from typing import Any

import ray

from grove.actors.advisor_messages import ReviewReport
from grove.actors.agent.batched import BatchAnswer
from grove.actors.coalesce import Coalescer
from grove.actors.contract import TOOL_CALL_TIMEOUT_S, SupervisorAPI
from grove.actors.errors import BudgetStop, ToolError, ToolRefused
from grove.actors.host.tickets import Ticket
from grove.actors.ray_proxy import RayProxy, waited
from grove.actors.telemetry import Tracing
from grove.actors.tools.fanout import WAIT_CAP_S
from grove.actors.turn_result import NewEntry, TurnResult
from grove.providers.base import ProviderName, Request, Tier
from grove.providers.errors import GroveError
from grove.providers.stream_events import RateLimitLeft

# What a lost record upward may meet: its call timed out, the supervisor is gone or refused it.
LOST_CALL_ERRORS = (TimeoutError, ray.exceptions.RayError, GroveError)


class FleetGate:
    """The fleet's rate limits, kept by the supervisor, for the providers that have them; the
    host's agents ask together (one call per batch)."""

    def __init__(self, supervisor: RayProxy[SupervisorAPI], providers: frozenset[str]) -> None:
        self.providers = providers
        asks = supervisor.call
        self._acquire = Coalescer(asks.fleet_acquire_many, "fleet-acquire")
        self._release = Coalescer(asks.fleet_release_many, "fleet-release")
        self._cool_down = asks.fleet_cool_down

    async def acquire(self, provider: str, tokens: int) -> None:
        """Returns when the request may go; until then, asks again when told to."""
        while True:
            wait = await self._acquire.call((provider, tokens))
            if not wait:
                return
            await asyncio.sleep(wait)

    async def release(self, provider: str, left: RateLimitLeft | None) -> None:
        await self._release.call((provider, left))

    async def cool_down(self, uuid: str, provider: str, seconds: float) -> None:
        await self._cool_down(uuid, provider, seconds)


class BudgetGate:
    """An agent's budget, held and settled by the supervisor around each request; the host's
    agents ask together (one call per batch)."""

    def __init__(self, supervisor: RayProxy[SupervisorAPI]) -> None:
        asks = supervisor.call
        self._reserve = Coalescer(asks.budget_reserve_many, "budget-reserve")
        self._settle = Coalescer(asks.budget_settle_many, "budget-settle")
        self._extend = asks.budget_extend

    async def reserve(
        self, uuid: str, model: str, tokens: int, max_tokens: int | None, tier: Tier
    ) -> Any:
        """The hold; while requests in flight hold the room, ask again as they settle."""
        while True:
            answer, detail = await self._reserve.call((uuid, model, tokens, max_tokens, tier))
            if answer == "held":
                return detail
            if answer == "refused":
                raise BudgetStop(detail)
            await asyncio.sleep(detail)

    async def extend(self, uuid: str, model: str, hold: Any, more: int) -> Any:
        ok, text, larger = await self._extend(uuid, model, hold, more)
        if not ok:
            raise BudgetStop(text)
        return larger

    async def settle(self, uuid: str, hold: Any, tokens: int, cost_usd: float) -> None:
        await self._settle.call((uuid, hold, tokens, cost_usd))


class BatchGate:
    """Requests on the batch tier, which the supervisor's collectors send and answer."""

    def __init__(self, supervisor: RayProxy[SupervisorAPI]) -> None:
        self._asks = supervisor.call

    async def reply(
        self, agent: str, provider: ProviderName, step: str, request: Request
    ) -> BatchAnswer:
        return await self._asks.batch_reply(agent, provider, step, request)


class ToolGate:
    """Tool calls that the supervisor answers: fan-out tools (each with the trace context of
    the call's span: a forked child's turns hang under it), shipped tools' code, approvals
    and a reviewer's advice."""

    def __init__(self, supervisor: RayProxy[SupervisorAPI], tracing: Tracing) -> None:
        self._asks = supervisor.call
        self._tracing = tracing

    async def call(self, agent: str, tool: str, arguments: dict[str, Any]) -> str:
        timeout = TOOL_CALL_TIMEOUT_S
        asked = arguments.get("timeout") if tool == "wait" else None
        if isinstance(asked, int | float) and math.isfinite(asked):
            timeout += min(max(float(asked), 0.0), WAIT_CAP_S)  # the supervisor refuses more
        trace = self._tracing.current()
        call = waited(self._asks.tool_call(agent, tool, arguments, trace))
        ok, text = await call.within(timeout)
        if not ok:
            raise ToolRefused(text)
        return str(text)

    async def source(self, agent: str, digest: str) -> bytes:
        return await self._asks.tool_source(agent, digest)

    async def approve(self, agent: str, tool: str, arguments: dict[str, Any]) -> None:
        ok, text = await self._asks.approve(agent, tool, arguments)
        if not ok:
            raise ToolError(text)

    async def advise(self, reviewer: str, arguments: dict[str, Any]) -> str:
        ok, text = await self._asks.advise(reviewer, arguments)
        if not ok:
            raise ToolRefused(text)
        return str(text)


class TurnRecords:
    """What a host's turns leave with the supervisor as they go: what each request is billed,
    finished steps, finished turns and reviews (the host's agents together, one call per
    batch where they come many at once)."""

    def __init__(self, supervisor: RayProxy[SupervisorAPI]) -> None:
        self._asks = supervisor.call
        self._billed = Coalescer(self._asks.billed_many, "billed")
        self._steps = Coalescer(self._asks.store_steps, "steps")

    async def billed(self, ticket_id: str, uuid: str, data: dict[str, Any]) -> None:
        """What a request of the turn may be billed at most, or what it was billed."""
        with contextlib.suppress(*LOST_CALL_ERRORS):  # the turn's report still goes
            await self._billed.call((ticket_id, uuid, data))

    async def store_steps(
        self, ticket: Ticket, entries: list[tuple[int, NewEntry]]
    ) -> list[int] | None:
        """Each entry's message id; None when the supervisor refused the turn's steps, or is
        gone (stopped with its Grove, or restarting): this run of the turn stops there, and
        a run that resumes it goes on from its stored steps (a call whose reply could not be
        stored never runs)."""
        try:
            ids = await asyncio.gather(
                *(self._steps.call((ticket, index, entry)) for index, entry in entries)
            )
        except ray.exceptions.RayActorError:
            return None
        if any(message_id is None for message_id in ids):
            return None
        return [message_id for message_id in ids if message_id is not None]

    async def send_reports(self, finished: list[tuple[Ticket, TurnResult]]) -> list[str]:
        """One call carrying finished turns; the ticket ids the supervisor did not store."""
        try:
            return await self._asks.complete_turns(finished)
        except LOST_CALL_ERRORS:
            return [ticket.ticket_id for ticket, _ in finished]

    async def reviewed(self, review: ReviewReport) -> None:
        """A reviewer's report; a lost one is not retried: the next carries the whole state."""
        with contextlib.suppress(*LOST_CALL_ERRORS):
            await self._asks.reviewed(review)
