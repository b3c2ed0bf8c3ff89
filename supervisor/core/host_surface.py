"""`HostSurface`: what hosts may ask of the supervisor (actors/contract.py `SupervisorAPI`):
rooms under rate limits and budgets, bills, finished steps and turns, tools, approvals, advice,
and replies to steps on the batch tier.
"""

from __future__ import annotations

from typing import Any

from grove.actors.advisor_messages import ReviewReport
from grove.actors.agent.batched import BatchAnswer
from grove.actors.host.tickets import Ticket
from grove.actors.turn_result import NewEntry, TurnResult
from grove.providers.base import ProviderName, Request, Tier
from grove.providers.errors import GroveError
from grove.providers.stream_events import RateLimitLeft
from grove.supervisor.agent_tools import tool_call
from grove.supervisor.budget import BUDGET_POLL_S, BudgetExhausted, Hold
from grove.supervisor.compaction import recover
from grove.supervisor.core.lifecycle import Lifecycle
from grove.supervisor.store.records import MessageRecord
from grove.supervisor.toolbox import decode_source


class HostSurface(Lifecycle):
    """The supervisor's answers to its hosts, over the core and its desks."""

    async def advise(self, reviewer: str, arguments: dict[str, Any]) -> tuple[bool, str]:
        """The `advise` tool of a reviewer: (True, what happens) or (False, why not)."""
        try:
            return True, self.advisors.advise(
                reviewer, str(arguments["note"]), str(arguments.get("severity") or "nit")
            )
        except GroveError as exc:
            return False, str(exc)

    async def reviewed(self, report: ReviewReport) -> None:
        await self.advisors.reviewed(report)

    async def tool_call(
        self, agent: str, tool: str, arguments: dict[str, Any], trace: str | None = None
    ) -> tuple[bool, str]:
        """A fan-out tool call from a host: (True, result) or (False, the reason refused);
        `trace`: the traceparent of the call's span."""
        self._wake()
        try:
            return True, await tool_call(self.core, agent, tool, arguments, trace)
        except GroveError as exc:
            return False, str(exc)

    async def tool_source(self, agent: str, digest: str) -> bytes:
        """The pickled code of a user tool, kept with the agent's root (a host asks once)."""
        self._wake()
        root = self.core.root_of(self.core.agent(agent))
        return decode_source(root.metadata.get("tool_sources", {})[digest])

    async def approve(self, agent: str, tool: str, arguments: dict[str, Any]) -> tuple[bool, str]:
        """May `agent` run `tool` now, which its policy says to ask about? (True, "") or
        (False, why not): see supervisor/approvals.py."""
        self._wake()
        return await self.approvals.request(agent, tool, arguments)

    async def fleet_acquire_many(self, requests: list[tuple[str, int]]) -> list[float]:
        """Before requests on rate-limited providers, `(provider, input tokens)` each: 0.0 for
        one that may go now (its slot and room are taken), else the seconds to wait before
        asking again."""
        return [self.fleet.try_acquire(provider, tokens) for provider, tokens in requests]

    async def fleet_release_many(self, ended: list[tuple[str, RateLimitLeft | None]]) -> list[None]:
        """Requests ended, `(provider, what its answer's rate-limit headers said is left)`."""
        for provider, left in ended:
            self.fleet.release(provider, left)
        return [None] * len(ended)

    async def fleet_cool_down(self, uuid: str, provider: str, seconds: float) -> None:
        """A 429 asked one agent to wait: every agent on that provider waits as long."""
        self.fleet.cool_down(provider, seconds)
        self.core.event("RateLimited", agent=uuid, provider=provider, seconds=round(seconds, 3))

    async def billed_many(self, requests: list[tuple[str, str, dict[str, Any]]]) -> list[None]:
        """Requests about to be sent or that ended, `(turn ticket, agent, its estimated bill or
        what it was billed)` each: kept until the turn is stored, stored anyway if the turn is
        lost with its host. A word that comes after its turn was lost is dropped (the request
        it tells of was kept at its estimate)."""
        for ticket_id, uuid, data in requests:
            if self.core.live(uuid).ticket_id == ticket_id:
                self.core.billing.seen(ticket_id, uuid, data)
        return [None] * len(requests)

    async def budget_reserve_many(
        self, requests: list[tuple[str, str, int, int | None, Tier]]
    ) -> list[tuple[str, Any]]:
        """Before requests of budgeted agents, `(agent, model, input tokens, max_tokens, price
        tier)` each:
        `("held", the hold)`, `("refused", why)` when it would pass a limit, or `("wait",
        seconds)` while requests in flight hold the room."""
        answers: list[tuple[str, Any]] = []
        for uuid, model, tokens, max_tokens, tier in requests:
            try:
                hold = self.budgets.try_reserve(uuid, model, tokens, max_tokens, tier)
            except GroveError as exc:  # a limit, or the agent is gone: this one, not the batch
                answers.append(("refused", str(exc)))
            else:
                answers.append(("wait", BUDGET_POLL_S) if hold is None else ("held", hold))
        return answers

    async def budget_extend(
        self, uuid: str, model: str, hold: Hold, more: int
    ) -> tuple[bool, str | None, Hold | None]:
        """A reply outgrew its hold: (True, None, the larger hold), or (False, why, None)."""
        try:
            return True, None, self.budgets.extend(uuid, model, hold, more)
        except BudgetExhausted as exc:
            return False, str(exc), None

    async def budget_settle_many(self, ended: list[tuple[str, Hold, int, float]]) -> list[None]:
        """Requests ended, `(agent, its hold, tokens used, cost)` each."""
        for uuid, hold, tokens, cost_usd in ended:
            self.budgets.settle(uuid, hold, tokens, cost_usd)
        return [None] * len(ended)

    async def batch_reply(
        self, agent: str, provider: ProviderName, step: str, request: Request
    ) -> BatchAnswer:
        """A step's request on the batch tier: its answer once its provider batch ends."""
        self._wake()
        return await self.tiers.reply(agent, provider, step, request)

    async def recover_context(
        self, uuid: str, reason: str, tokens: int
    ) -> list[MessageRecord] | None:
        """A host met the context limit in a turn: compact, and send the new conversation."""
        return await recover(self.core, uuid, reason, tokens)

    async def store_steps(self, steps: list[tuple[Ticket, int, NewEntry]]) -> list[int | None]:
        """Finished steps of turns in flight, from a host as they end: each one's message id
        (None: not stored, the turn is no longer in flight there)."""
        self._wake()
        return self.core.store_steps(steps)

    async def complete_turns(self, finished: list[tuple[Ticket, TurnResult]]) -> list[str]:
        """Turns a host finished, reported together; the ticket ids that were not stored."""
        self._wake()
        return self.core.complete_turns(finished)
