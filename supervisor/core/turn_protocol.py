"""`TurnProtocol`: a turn's life on the supervisor's side: checked, begun on its host, its
steps and end stored once, waited for. What a restart or a host's death does is recovery.py's.
"""

from __future__ import annotations

import asyncio
import uuid as uuidlib
from collections.abc import Sequence

from grove.actors.agent.choice import ModelChoice
from grove.actors.contract import HOST_CALL_TIMEOUT_S
from grove.actors.host.tickets import Activation, Ticket
from grove.actors.output import OutputType
from grove.actors.telemetry import TraceParent
from grove.actors.tools.grant import ToolGrant
from grove.actors.turn_result import NewEntry, TurnResult
from grove.providers.base import Usage
from grove.supervisor.budget_rules import budgeted
from grove.supervisor.core.placement import Placement
from grove.supervisor.errors import CommandError, StoreError, SupervisorError
from grove.supervisor.rules import NO_MODEL_TEXT
from grove.supervisor.store.kinds import TURN_END_KIND
from grove.supervisor.store.records import AgentRecord, MessageRecord
from grove.supervisor.supervision import given_up_text
from grove.supervisor.tool_rules import grant_of
from grove.supervisor.turns import (
    LiveAgent,
    TurnTicket,
    calls_tools,
    choice_of,
    prompt_data,
    seeded_messages,
    step_events,
    step_message,
    stored_entry,
    turn_events,
    turn_messages,
    turn_output,
)
from grove.supervisor.worktrees import worktree_of


class TurnProtocol(Placement):
    """Turns begun, stored as their steps end and as they end, and waited for."""

    def turn_rules(
        self, uuid: str, *, resumed: bool = False, record: AgentRecord | None = None
    ) -> tuple[AgentRecord, ModelChoice, LiveAgent]:
        """What a new turn of `uuid` is checked against (CommandError, SupervisorError): the
        agent's record, its model and its live state (placing it on first use). A `resumed`
        turn is the same turn again: its budgets neither count nor check it as a new one (its
        requests still ask them for room). `record`: the agent's, when the caller read it."""
        record = record or self.agent(uuid)
        if record.status != "running":
            raise CommandError(f"Agent {record.uuid} is {record.status}")
        choice = choice_of(record)
        if choice is None:
            raise CommandError(NO_MODEL_TEXT)
        if not resumed:
            self.budgets.before_turn(record, True)
        state = self.live(record.uuid, record)
        if state.host_id in self.given_up:
            raise SupervisorError(given_up_text(state.host_id, self.restart_policy))
        return record, choice, state

    async def begin_turn(
        self,
        uuid: str,
        text: str | None,
        *,
        entry: NewEntry | None = None,
        output: OutputType | None = None,
        resumed: bool = False,
    ) -> TurnTicket:
        """Check the rules, persist the user message, start the turn on the agent's host.
        `entry` instead of `text` starts the turn with a message stored already (advice);
        `output` makes its answer typed (else the agent's own, if its record has one);
        `resumed`: neither, the interrupted turn goes on from its last stored step.

        Turns of one agent begin one at a time, in arrival order (a turn a restart cut off
        first resumes and ends: Recovery.begin_turn). Before the first turn on a model the
        host builds the provider and resolves its credentials, so a missing key fails here:
        nothing sent, nothing saved."""
        record, choice, state = self.turn_rules(uuid, resumed=resumed)
        async with state.begin_lock:
            while state.ticket_id is not None:
                await state.turn_done.wait()
            if self.advisors is not None:
                state.released.clear()
                await self.advisors.wait_for_backlog(record.uuid, state.released)
            if not state.active or state.ready_for != choice:
                activation = None if state.active else self.activation(record)
                await asyncio.wait_for(
                    state.host.prepare(record.uuid, choice, activation), HOST_CALL_TIMEOUT_S
                )
                state.active, state.ready_for = True, choice
            user: NewEntry | None = entry
            own: list[MessageRecord] = []  # a resumed turn's output type is its prompt's
            if text is not None:
                stored = self.store.append_message(record.uuid, "user", text, prompt_data(output))
                user = stored_entry(stored)
            elif resumed and output is None:
                own = self.store.agent_messages(record.uuid)
            output = turn_output(record, output, own)
            ticket = Ticket(
                ticket_id=uuidlib.uuid4().hex,
                uuid=record.uuid,
                user=user,
                choice=choice,
                output=output,
                trace=TraceParent.from_metadata(record.metadata),
            )
            state.ticket_id = ticket.ticket_id
            state.turn_done.clear()
            try:
                await asyncio.wait_for(state.host.start_turn(ticket, None), HOST_CALL_TIMEOUT_S)
                state.started = ticket.ticket_id
            except BaseException:
                if state.ticket_id == ticket.ticket_id:  # else host_died has taken it over
                    state.ticket_id = None
                    state.active = False
                    state.turn_done.set()
                raise
        self.event("TurnStarted", agent=record.uuid, ticket=ticket.ticket_id)
        return TurnTicket(ticket=ticket, host_id=state.host_id)

    def seed(self, uuid: str, entries: Sequence[tuple[str, str]]) -> list[MessageRecord]:
        """Append `(kind, content)` user and assistant messages to an agent's history in one
        store call, sending nothing to a model: a shared context its forks will inherit."""
        record = self.agent(uuid)
        if record.status != "running":
            raise CommandError(f"Agent {record.uuid} is {record.status}")
        if self.streaming(record.uuid):
            raise CommandError(f"Agent {record.uuid} is streaming; seed it when the turn ends")
        for kind, _ in entries:
            if kind not in ("user", "assistant"):
                raise CommandError(f"A seeded message is user or assistant, not {kind!r}")
        new = seeded_messages(record.uuid, entries)
        stored = self.store.append_messages(new) if new else []
        state = self._live.get(record.uuid)
        if state is not None:
            state.active = False  # the host's copy of the conversation is stale
        return stored

    def activation(
        self,
        record: AgentRecord,
        history: list[MessageRecord] | None = None,
        tools: ToolGrant | None = None,
    ) -> Activation:
        """What a host needs to build the agent: its conversation (read here unless given)
        and its grant (made here unless given: fork_many shares one among siblings)."""
        return Activation(
            uuid=record.uuid,
            choice=choice_of(record),
            history=list(self.store.conversation(record.uuid) if history is None else history),
            system=record.metadata.get("system"),
            tools=grant_of(record.metadata) if tools is None else tools,
            budgeted=budgeted(record.metadata),
            workspace=record.metadata.get("workspace"),
            worktree=worktree_of(record.metadata),
        )

    def store_steps(self, steps: Sequence[tuple[Ticket, int, NewEntry]]) -> list[int | None]:
        """Finished steps of turns in flight (a reply that calls tools, a tool result), stored
        as they end in ONE store transaction, each keyed as its finished turn would store it
        (a repeat stores nothing twice); their tool events go out now. The message id of
        each; None for a step of a turn that is no longer its agent's turn in flight (another
        run of it took over), which is not stored."""
        current = [
            (ticket, index, entry)
            for ticket, index, entry in steps
            if self.live(ticket.uuid).ticket_id == ticket.ticket_id
        ]
        stored = self.store.append_messages([step_message(*step) for step in current])
        ids = {(t.ticket_id, index): m.id for (t, index, _), m in zip(current, stored, strict=True)}
        with self.event_log.batched():
            for ticket, _, entry in current:
                if entry.kind == "assistant":
                    billed = {key: value for key, value in entry.data.items() if key != "parts"}
                    self.billing.step_stored(ticket.ticket_id, billed)
                for kind, payload in step_events(ticket.uuid, entry):
                    self.event(kind, **payload)
        return [ids.get((ticket.ticket_id, index)) for ticket, index, _ in steps]

    def complete_turn(self, ticket: Ticket, result: TurnResult) -> list[MessageRecord]:
        """Persist what the turn produced, once per ticket, then release the agent."""
        new = turn_messages(ticket, result)
        stored = self.store.append_messages(new) if new else []
        self._release_turn(ticket, result)
        return stored

    def complete_turns(self, finished: Sequence[tuple[Ticket, TurnResult]]) -> list[str]:
        """`complete_turn` for many turns in ONE store transaction. When the store refuses
        it, each turn is stored alone, so a bad turn fails alone. Returns the ticket ids
        that could not be stored (their host reports them again). Their events go out in
        one write too."""
        with self.event_log.batched():
            return self._complete_turns(finished)

    def _complete_turns(self, finished: Sequence[tuple[Ticket, TurnResult]]) -> list[str]:
        try:
            new = [message for item in finished for message in turn_messages(*item)]
            if new:
                self.store.append_messages(new)
        except (StoreError, ValueError):
            failed: list[str] = []
            for ticket, result in finished:
                try:
                    self.complete_turn(ticket, result)
                except (StoreError, ValueError):
                    failed.append(ticket.ticket_id)
            return failed
        for ticket, result in finished:
            self._release_turn(ticket, result)
        return []

    def _release_turn(self, ticket: Ticket, result: TurnResult) -> None:
        """After the turn is stored: clear the in-flight flag, wake waiters, emit the event."""
        state = self.live(ticket.uuid)
        self.billing.stored(ticket.ticket_id)
        if state.ticket_id == ticket.ticket_id:
            state.ticket_id = None
            state.last_result = result
            state.turn_done.set()
        if result.error is not None:
            # The host's copy of the conversation holds the failed steps: rebuild it.
            state.active = False
        if self.advisors is not None and self.advisors.reviewers_of(ticket.uuid):
            self.advisors.feed(ticket.uuid)
        for kind, payload in turn_events(ticket, result):
            self.event(kind, **payload)

    async def wait_turn(self, uuid: str, timeout_s: float) -> TurnResult | None:
        """The result of the agent's turn in flight once it ends (or of its last one, read
        back from the store when none ended here); None when none ended within `timeout_s`,
        or, at once, when none is in flight and no answer is stored."""
        state = self.live(uuid)
        try:
            await asyncio.wait_for(state.turn_done.wait(), timeout_s)
        except TimeoutError:
            return None
        return state.last_result or self.stored_result(uuid)

    async def wait_any(
        self, uuids: Sequence[str], timeout_s: float
    ) -> dict[str, TurnResult | None]:
        """As soon as at least one of `uuids` has no turn in flight: each such agent's last
        result. Empty after `timeout_s` when none finished. A turn interrupted by a dead host
        and waiting for its retry is still in flight (its `turn_done` stays clear)."""
        states = [self.live(uuid) for uuid in uuids]
        if not states:
            return {}
        if not any(state.turn_done.is_set() for state in states):  # else no need to wait
            waits = [asyncio.ensure_future(state.turn_done.wait()) for state in states]
            done, pending = await asyncio.wait(
                waits, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED
            )
            for waiting in pending:
                waiting.cancel()
            if not done:
                return {}
        return {
            uuid: self._live[uuid].last_result or self.stored_result(uuid)
            for uuid in uuids
            if self._live[uuid].turn_done.is_set()
        }

    def stored_result(self, uuid: str) -> TurnResult | None:
        """An agent's last answer read back from the store (after a supervisor restart the
        live result is gone, the stored one is not)."""
        for message in reversed(self.store.agent_messages(uuid)):
            if message.kind in ("user", "tool_result", TURN_END_KIND):
                return None
            if message.kind == "assistant":
                if calls_tools(message.data):  # a step of a turn not finished
                    return None
                return TurnResult(
                    text=message.content,
                    usage=Usage(**message.data.get("usage", {})),
                    cost_usd=float(message.data.get("cost_usd", 0.0)),
                    stop_reason=message.data.get("stop_reason"),
                    worktree=message.data.get("worktree"),
                    output=message.data.get("output"),
                    output_error=message.data.get("output_error"),
                    output_retries=int(message.data.get("output_retries", 0)),
                    retry_usage=Usage(**message.data.get("retry_usage", {})),
                )
        return None
