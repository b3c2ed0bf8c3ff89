"""`Recovery`: turns that lost their host or were cut off by a supervisor restart resume
from their last stored step, their result stored exactly once; dead hosts are replaced.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence

from grove.actors.agent.estimates import ESTIMATED
from grove.actors.contract import HostAPI
from grove.actors.host.tickets import Ticket
from grove.actors.output import OutputType
from grove.actors.turn_result import NewEntry, TurnResult
from grove.providers.base import Usage
from grove.supervisor.core.parts import RECOVERING
from grove.supervisor.core.turn_protocol import TurnProtocol
from grove.supervisor.errors import HostDiedError
from grove.supervisor.holding import unheld_agents
from grove.supervisor.store.records import AgentRecord
from grove.supervisor.supervision import RestartIntensity, given_up_text
from grove.supervisor.turns import LiveAgent, TurnTicket, turn_open


class Recovery(TurnProtocol):
    """Hosts replaced within the restart intensity, interrupted turns run again."""

    async def begin_turn(
        self,
        uuid: str,
        text: str | None,
        *,
        entry: NewEntry | None = None,
        output: OutputType | None = None,
        resumed: bool = False,
    ) -> TurnTicket:
        """TurnProtocol.begin_turn, after a turn a restart cut off resumes and ends before
        the agent's first prompt here."""
        if text is not None and self.cut_off(uuid):
            await self._finish_cut_off(uuid)
        return await super().begin_turn(uuid, text, entry=entry, output=output, resumed=resumed)

    async def host_died(
        self, host_id: str, host: HostAPI, replace: Callable[[], Awaitable[None]]
    ) -> None:
        """The host `host_id` is gone: replace it (within the restart intensity; `host`, its
        contract, then calls the new one) and rebuild its agents on their next message. Turns
        it was running are reported interrupted and resume on the new host from their last
        stored step, so their result is still stored exactly once."""
        affected = [(uuid, state) for uuid, state in self._live.items() if state.host_id == host_id]
        intensity = self._intensity.setdefault(host_id, RestartIntensity(self.restart_policy))
        if not intensity.allow():
            self.given_up.add(host_id)
            text = given_up_text(host_id, self.restart_policy)
            self.event("HostGivenUp", host=host_id, error=text)
            for uuid, state in affected:
                self._lost_with_host(uuid, state)
                self._interrupted(uuid, state, text)
            return
        await replace()
        self.event("HostRestarted", host=host_id, agents=len(affected))
        for uuid, state in affected:
            state.active, state.ready_for = False, None
            self._lost_with_host(uuid, state)
            if state.ticket_id is None:
                continue
            self.event("TurnInterrupted", agent=uuid, ticket=state.ticket_id, host=host_id)
            state.ticket_id = None  # waiters keep waiting: the resumed turn is this turn's end
            self._schedule_retry(uuid, state)
        if self.advisors is not None:
            await self.advisors.host_replaced(host)

    def _lost_with_host(self, uuid: str, state: LiveAgent) -> None:
        """The agent's host died: what the requests of its turn in flight were billed is
        kept, and what they held of its budgets goes back, a request sent and not answered
        yet counted at its estimate (as `_keep_billed` stores it)."""
        tokens, cost_usd = self._keep_billed(state)
        self.budgets.release(uuid, tokens, cost_usd)

    def _keep_billed(self, state: LiveAgent) -> tuple[int, float]:
        """A turn lost: what its requests were billed is stored all the same, one sent and not
        answered yet at its estimate (billing.py); that estimate's tokens and cost."""
        lost = [] if state.ticket_id is None else self.billing.lost(state.ticket_id)
        if lost:
            self.store.append_messages(lost)
        for message in lost:
            if message.data.get(ESTIMATED):
                usage = Usage(**message.data["usage"])
                return usage.input_tokens + usage.output_tokens, float(message.data["cost_usd"])
        return 0, 0.0

    def recover(self) -> int:
        """After a supervisor restart: turns that were in flight are reported interrupted and
        resume from their last stored step, once the reviewers of the supervisor before watch
        their agents again (started anew); not those of trees another live Grove holds: it
        runs them. Until then they count as in flight, so nobody waiting takes them for
        finished. Returns how many."""
        reviewers: list[AgentRecord] = []
        cut_off: list[str] = []
        for record in unheld_agents(self.store, self.holding.holder):
            if record.role == "advisor":
                self.store.update_agent(record.uuid, status="dead", ended_at=time.time())
                reviewers.append(record)
            elif turn_open(self.store.agent_messages(record.uuid)):
                self._hold_open(record, "supervisor restarted")
                cut_off.append(record.uuid)
        self.background(self._recovered(reviewers, cut_off))
        return len(cut_off)

    async def _recovered(self, reviewers: list[AgentRecord], cut_off: list[str]) -> None:
        if self.advisors is not None:
            await self.advisors.restore(reviewers)
        for uuid in cut_off:
            self._schedule_retry(uuid, self.live(uuid))

    def cut_off(self, uuid: str) -> bool:
        """Whether the agent's last turn was cut off by a restart: stored open, and this
        supervisor neither made the agent nor ran it (a Grove before it was stopped or
        killed mid-turn)."""
        if uuid in self._live or uuid in self._created:
            return False
        record = self.agent(uuid)
        return record.uuid not in self._live and turn_open(self.store.agent_messages(record.uuid))

    async def _finish_cut_off(self, uuid: str) -> None:
        """Before an agent's first prompt here: its turn a restart cut off resumes and ends
        first, so that the prompt follows a whole turn."""
        record = self.agent(uuid)
        self._resume(record, "cut off by a restart")
        await self.live(record.uuid).turn_done.wait()

    def _resume(self, record: AgentRecord, reason: str) -> None:
        """Resume an agent's open turn from its last stored step."""
        self._schedule_retry(record.uuid, self._hold_open(record, reason))

    def _hold_open(self, record: AgentRecord, reason: str) -> LiveAgent:
        """An agent's open turn is to resume: until it has begun, the turn counts as in
        flight, so nobody waiting takes it for finished."""
        self.event("TurnInterrupted", agent=record.uuid, reason=reason)
        state = self.live(record.uuid, record)
        state.ticket_id = RECOVERING
        state.turn_done.clear()
        return state

    def _interrupted(self, uuid: str, state: LiveAgent, error: str) -> None:
        self._keep_billed(state)
        state.ticket_id = None
        state.active = False
        state.last_result = TurnResult(error=error)
        state.turn_done.set()

    def _schedule_retry(self, uuid: str, state: LiveAgent) -> None:
        """Run an interrupted turn again, once: a retry already under way goes on by itself."""
        if not state.retrying:
            state.retrying = True
            self.background(self._retry(uuid))

    async def _retry(self, uuid: str) -> None:
        """Run an interrupted turn again. When the host dies again before the retry has
        started, the retry goes on on its replacement (a host given up on fails `begin_turn`
        for good). Whatever else stops it (a Grove error, a host call timing out, a Ray error)
        ends the turn as interrupted: its waiters get that answer instead of waiting for a
        turn that never comes."""
        state = self.live(uuid)
        if state.ticket_id == RECOVERING:
            state.ticket_id = None
        try:
            while True:
                try:
                    await self.begin_turn(uuid, None, resumed=True)
                    return
                except HostDiedError:
                    continue  # host_died has dealt with the host before this was raised
        except Exception as exc:  # the turn's end, whatever the cause
            reason = str(exc) or type(exc).__name__
            self._interrupted(uuid, state, f"interrupted, and the retry failed: {reason}")
        finally:
            state.retrying = False

    def _retry_unseen(self, host_id: str, tickets: Sequence[Ticket]) -> None:
        """A host died as these turns were handed to it, and has been dealt with by now:
        `host_died` retried the turns it found in flight; those it could not see (the death
        was handled before they were placed there) are retried here, each once."""
        for ticket in tickets:
            state = self._live[ticket.uuid]
            if state.ticket_id == ticket.ticket_id:
                self._lost_with_host(ticket.uuid, state)
                self.event(
                    "TurnInterrupted", agent=ticket.uuid, ticket=ticket.ticket_id, host=host_id
                )
                state.ticket_id = None  # waiters keep waiting: the retry is this turn's end
                self._schedule_retry(ticket.uuid, state)
