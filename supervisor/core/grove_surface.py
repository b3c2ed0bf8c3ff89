"""`GroveSurface`: what a Grove asks of the supervisor (supervisor/contract.py
`SupervisorService`): roots, forks and turns begun, waited for and cancelled, commands, mail.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from grove.actors.output import OutputType
from grove.actors.tools.todo import TodoError, from_markdown, to_data, to_markdown
from grove.actors.turn_result import TurnResult
from grove.providers.model_specs import ModelSpec
from grove.providers.tier_rules import checked_tier
from grove.supervisor.advisor_plan import ReviewerConfig
from grove.supervisor.budget_rules import Budget
from grove.supervisor.commands.bus import dispatch
from grove.supervisor.commands.registry import CommandOutcome
from grove.supervisor.core.coalesced_turns import begin_turns
from grove.supervisor.core.host_surface import HostSurface
from grove.supervisor.core.lifecycle import HostRoster
from grove.supervisor.core.parts import CoreParts
from grove.supervisor.errors import CommandError
from grove.supervisor.fleet import ProviderLimits
from grove.supervisor.fork_options import ForkOptions
from grove.supervisor.forking import fork_child
from grove.supervisor.store.records import AgentRecord, MessageRecord
from grove.supervisor.turns import Begun, TurnTicket

RESUME_POLL_S = 0.05  # how often a reader asks whether a resumed turn has begun


class GroveSurface(HostSurface):
    """The supervisor's answers to a Grove (and, through HostSurface, to its hosts). `aliases`:
    the model aliases commands resolve."""

    def __init__(
        self,
        parts: CoreParts,
        hosts: HostRoster,
        rate_limits: dict[str, ProviderLimits],
        restarted: Callable[[], bool],
        aliases: dict[str, str],
    ) -> None:
        super().__init__(parts, hosts, rate_limits, restarted)
        self.aliases = aliases

    async def create_root(
        self,
        spec: ModelSpec | None,
        system: str | None,
        isolation: str | None,
        tools: dict[str, Any] | None = None,
        trace_parent: str | None = None,
    ) -> AgentRecord:
        """`tools` holds the record's tool entries (supervisor/toolbox.py ResolvedTools);
        `trace_parent`: the caller's span, when it traces (the root's trace goes under it)."""
        self._wake()
        record = self.core.create_root(
            spec, system=system, isolation=isolation, tools=tools, trace_parent=trace_parent
        )
        if self.advisors.plan.enabled:
            await self.advisors.attach_all(record.uuid)
        return record

    async def wait_reviews(self, agent: str, timeout_s: float) -> int:
        """Wait until no reviewer of `agent` has work queued; returns the backlog left."""
        return await self.advisors.wait_idle(self.core.agent(agent).uuid, timeout_s)

    async def set_todo(self, session: str, markdown: str) -> str:
        """Replace the focused agent's todo list with one written as markdown (`/todo edit`)."""
        self._wake()
        record = self.core.agent(self.core.store.get_focus(session) or session)
        try:
            phases = from_markdown(markdown)
        except TodoError as exc:
            raise CommandError(f"The todo list was not changed: {exc}") from exc
        todo = to_data(phases)
        self.core.store.update_agent(record.uuid, metadata={**record.metadata, "todo": todo})
        self.core.event("TodoEdited", agent=record.uuid)
        return to_markdown(phases) or "The todo list is empty"

    async def advice(self, agent: str) -> list[MessageRecord]:
        return self.advisors.advice_given(self.core.agent(agent).uuid)

    async def attend_approvals(self, session: str, on: bool) -> None:
        self._wake()
        self.approvals.attend(session, on)

    async def answer_approval(self, request_id: str, decision: str) -> str:
        self._wake()
        return self.approvals.answer(request_id, decision)

    async def begin_turn(
        self, uuid: str, text: str | None, output: OutputType | None = None
    ) -> Begun:
        self._wake()
        return self._begun(await self.core.begin_turn(uuid, text, output=output))

    async def begin_turns(
        self, requests: list[tuple[str, str, OutputType | None]]
    ) -> list[Begun | Exception | None]:
        """Many turns begun at once (concurrent asks: supervisor/core/coalesced_turns.py): for each
        request its turn, the error it met, or None: begin it alone."""
        self._wake()
        outcomes = await begin_turns(self.core, requests)
        return [
            self._begun(outcome) if isinstance(outcome, TurnTicket) else outcome
            for outcome in outcomes
        ]

    def _begun(self, turn: TurnTicket) -> Begun:
        return turn.ticket.ticket_id, turn.ticket.uuid, self.host(turn.host_id)

    async def fork_many(
        self,
        parent: str,
        prompts: list[str],
        model: ModelSpec | None,
        system: str | None = None,
        advisor: ModelSpec | None = None,
        keys: list[str] | None = None,
        budget: Budget | None = None,
        output: OutputType | None = None,
        options: ForkOptions | None = None,
    ) -> list[str]:
        """`advisor`: a reviewer on that model watches every child from its first turn;
        `budget`: the children (and theirs) draw on it, besides their tree's budget;
        `output`: their answers are typed; `options` go to the core as they are."""
        self._wake()

        async def attach(children: list[AgentRecord]) -> None:
            if advisor is not None:
                reviewer = ReviewerConfig(name="advisor", model=advisor)
                for child in children:
                    await self.advisors.attach(child.uuid, reviewer, cursor=child.fork_message_id)

        children = await self.core.fork_many(
            parent,
            prompts,
            model,
            system,
            before_start=attach,
            keys=keys,
            budget=budget,
            output=output,
            **(options or {}),
        )
        return [record.uuid for record in children]

    async def release_caches(self, agent: str | None) -> int:
        parent = None if agent is None else self.core.agent(agent).uuid
        return await self.core.fork_caches.release(parent)

    async def fork(
        self,
        parent: str,
        prompt: str | None,
        model: ModelSpec | None,
        tools: list[str] | None,
        workspace: str | None,
        tier: str | None = None,
    ) -> AgentRecord:
        """One child of `parent`, as a model's `fork` tool makes it; its first turn starts
        when there is a prompt. `tier`: its price tier (default: the parent's)."""
        self._wake()
        own_tier = checked_tier(tier) if tier is not None else None
        record = self.core.agent(parent)
        forked = await fork_child(
            self.core,
            record,
            model,
            prompt=prompt,
            origin="api",
            tools=tools,
            workspace=workspace,
            tier=own_tier,
        )
        return forked.child

    async def answered(self, keys: list[str]) -> dict[str, tuple[str, TurnResult]]:
        return self.core.answered(keys)

    async def seed(self, uuid: str, entries: list[tuple[str, str]]) -> list[MessageRecord]:
        return self.core.seed(uuid, entries)

    async def wait_any(self, uuids: list[str], timeout_s: float) -> dict[str, TurnResult | None]:
        self._wake()
        return await self.core.wait_any(uuids, timeout_s)

    async def wait_turn(self, uuid: str, timeout_s: float) -> TurnResult | None:
        self._wake()
        return await self.core.wait_turn(uuid, timeout_s)

    async def cancel(self, uuid: str) -> bool:
        agent = self.core.agent(uuid).uuid
        state = self.core.live(agent)
        state.released.set()  # a turn waiting on its reviewers' backlog goes on at once
        await self.advisors.release_waiters()
        cancelled = await state.host.cancel(uuid)
        await self.tiers.cancel(agent)  # its steps on the batch tier, and their batches
        return cancelled

    async def route_mail(self, batch: list[tuple[str, str, str]]) -> list[int]:
        return await self.core.route_mail(batch)

    async def dispatch(self, session: str, line: str, origin: str) -> CommandOutcome:
        self._wake()
        record = None if self.core.holds(session) else self.core.store.get_agent(session)
        if record is not None:  # a session resumed here is held from its first command on
            self.core.hold(record)
        return await dispatch(self.core, session, line, origin=origin, aliases=self.aliases)

    async def focus(self, session: str) -> str:
        return self.core.store.get_focus(session) or session

    async def agent(self, prefix: str) -> AgentRecord:
        return self.core.agent(prefix)

    async def conversation(self, uuid: str) -> list[MessageRecord]:
        return self.core.store.conversation(uuid)

    async def streaming(self, uuid: str) -> bool:
        return self.core.streaming(uuid)

    async def turns_in_flight(self) -> int:
        return self.core.turns_in_flight()

    async def turn_host(self, uuid: str, timeout_s: float) -> Any:
        """The host running the agent's turn in progress and that turn's ticket, once the turn
        has begun there: a turn between hosts (its host died, a restart cut it off) is waited
        for on its new one, up to `timeout_s` (None: no turn is in flight, or none began)."""
        if not self.core.in_flight(uuid):
            return None
        return await self.resumed_host(uuid, "", timeout_s)

    async def resumed_host(self, uuid: str, dead: str, timeout_s: float) -> Any:
        """After the host running the agent's turn `dead` (a ticket) died: the host its
        resumed turn runs on and that turn's ticket, once it has begun there (None when no
        turn is in flight, or none began in time)."""
        state = self.core.live(self.core.agent(uuid).uuid)
        deadline = asyncio.get_running_loop().time() + timeout_s
        while not state.turn_done.is_set():
            ticket = state.ticket_id
            if ticket is not None and ticket != dead and state.started == ticket:
                return self.host(state.host_id), ticket
            if asyncio.get_running_loop().time() > deadline:
                return None
            await asyncio.sleep(RESUME_POLL_S)
        return None

    async def provider_identity(self, uuid: str) -> dict[str, Any]:
        state = self.core.live(uuid)
        identity = await state.host.provider_identity(uuid)
        return {"host": state.host_id, **identity}
