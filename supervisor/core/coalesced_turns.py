"""`begin_turns`: many turns begun together (concurrent asks) with one store transaction, one
prepare and one start call per host, each request's error kept for that request alone.
"""

from __future__ import annotations

import asyncio
import functools
import uuid as uuidlib
from collections.abc import Awaitable, Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from grove.actors.agent.choice import ModelChoice
from grove.actors.contract import HOST_CALL_TIMEOUT_S, HostAPI
from grove.actors.host.tickets import Activation, Ticket
from grove.actors.output import OutputType
from grove.actors.telemetry import TraceParent
from grove.supervisor.store.records import AgentRecord, NewMessage
from grove.supervisor.turns import (
    LiveAgent,
    TurnTicket,
    prompt_data,
    stored_entry,
    turn_output,
)

if TYPE_CHECKING:
    from grove.supervisor.core import SupervisorCore

# (agent, its message, the answer's type) for each turn to begin.
TurnRequest = tuple[str, str, OutputType | None]
# Each request's outcome: its ticket, the error it met, or None: begin it alone (`begin_turn`),
# its agent being busy (a turn in flight, or a second request for it in the batch).
TurnOutcome = TurnTicket | Exception | None


@dataclass(slots=True)
class _Begun:
    index: int
    record: AgentRecord
    choice: ModelChoice
    state: LiveAgent
    text: str
    output: OutputType | None
    ticket: Ticket | None = None


async def begin_turns(core: SupervisorCore, requests: Sequence[TurnRequest]) -> list[TurnOutcome]:
    """Begin the turns of idle agents together, as `begin_turn` would one by one; a request
    for a busy agent (or one whose turn a restart cut off) comes back None, for its caller to
    begin alone (it waits its turn)."""
    outcomes: list[TurnOutcome] = [None] * len(requests)
    batch: list[_Begun] = []
    batched: set[str] = set()
    records = _records(core, [uuid for uuid, _, _ in requests])
    for index, (uuid, text, output) in enumerate(requests):
        try:
            if core.cut_off(uuid):  # begun alone: its cut-off turn resumes and ends first
                continue
            record, choice, state = core.turn_rules(uuid, record=records.get(uuid))
        except Exception as exc:  # this request's error, for its caller
            outcomes[index] = exc
            continue
        idle = state.ticket_id is None and not state.begin_lock.locked()
        if idle and record.uuid not in batched:
            batch.append(_Begun(index, record, choice, state, text, output))
            batched.add(record.uuid)
    with ExitStack() as held:
        for item in batch:  # free locks: taken at once, before anything awaits
            await item.state.begin_lock.acquire()
            held.callback(item.state.begin_lock.release)
        if core.advisors is not None:
            for item in batch:
                item.state.released.clear()
            await asyncio.gather(
                *(core.advisors.wait_for_backlog(i.record.uuid, i.state.released) for i in batch)
            )
        batch = await _prepared(core, batch, outcomes)
        if not batch:
            return outcomes
        try:
            stored = core.store.append_messages(
                [
                    NewMessage(
                        agent_uuid=i.record.uuid,
                        kind="user",
                        content=i.text,
                        data=prompt_data(i.output),
                    )
                    for i in batch
                ]
            )
        except Exception as exc:
            for item in batch:
                outcomes[item.index] = exc
            return outcomes
        for item, message in zip(batch, stored, strict=True):
            output = turn_output(item.record, item.output)
            item.ticket = Ticket(
                ticket_id=uuidlib.uuid4().hex,
                uuid=item.record.uuid,
                user=stored_entry(message),
                choice=item.choice,
                output=output,
                trace=TraceParent.from_metadata(item.record.metadata),
            )
            item.state.ticket_id = item.ticket.ticket_id
            item.state.turn_done.clear()
        started = await _per_host(
            batch, lambda host, items: host.start_turns([i.ticket for i in items if i.ticket])
        )
    with core.event_log.batched():
        core.event("TurnsBegun", count=len(requests), started=len(started))
        for item, error in started:
            ticket = item.ticket
            assert ticket is not None
            if error is None:
                item.state.started = ticket.ticket_id
                outcomes[item.index] = TurnTicket(ticket=ticket, host_id=item.state.host_id)
                core.event("TurnStarted", agent=item.record.uuid, ticket=ticket.ticket_id)
                continue
            outcomes[item.index] = error
            if item.state.ticket_id == ticket.ticket_id:  # else host_died has taken it over
                item.state.ticket_id = None
                item.state.active = False
                item.state.turn_done.set()
    return outcomes


def _records(core: SupervisorCore, uuids: list[str]) -> dict[str, AgentRecord]:
    """The agents' records in one store read; none when it fails, so that each request
    reads its own and meets its own error (as does a prefix, which this read does not
    resolve)."""
    try:
        return core.store.get_agents(uuids)
    except Exception:
        return {}


async def _prepared(
    core: SupervisorCore, batch: list[_Begun], outcomes: list[TurnOutcome]
) -> list[_Begun]:
    """The batch's agents held on their models, built first where their host has none (one
    call per host and inherited prefix): those that are ready; the others' errors go to
    their outcomes."""
    unready = [i for i in batch if not i.state.active or i.state.ready_for != i.choice]
    prefixes = _fork_prefixes(core, [i.record for i in unready if not i.state.active])

    def items(group: list[_Begun]) -> list[tuple[str, ModelChoice, Activation | None]]:
        return [
            (
                i.record.uuid,
                i.choice,
                None
                if i.state.active
                else core.activation(i.record, history=[] if i.record.uuid in prefixes else None),
            )
            for i in group
        ]

    def prefix_of(item: _Begun) -> tuple[str, int] | None:
        inherited = prefixes.get(item.record.uuid)
        return None if inherited is None else inherited[0]

    def prepare(host: HostAPI, group: list[_Begun]) -> Awaitable[list[Exception | None]]:
        inherited = prefixes.get(group[0].record.uuid)
        return host.prepare_many(items(group), [] if inherited is None else inherited[1])

    failed: set[int] = set()
    prepared = await _per_host(unready, prepare, prefix_of)
    for item, error in prepared:
        if error is None:
            item.state.active, item.state.ready_for = True, item.choice
        else:
            outcomes[item.index] = error
            failed.add(item.index)
    return [item for item in batch if item.index not in failed]


def _fork_prefixes(
    core: SupervisorCore, records: list[AgentRecord]
) -> dict[str, tuple[tuple[str, int], Any]]:
    """For agents to build that were forked and have nothing of their own yet (a fan-out's
    asks): their parent and fork point, and the conversation they inherit, shared as
    `fork_many` shares it (supervisor/prefixes.py: put once, kept for the next fork). The
    others build from their own conversation, read by `activation`."""
    counts = core.store.message_counts([record.uuid for record in records]) if records else {}
    found: dict[str, tuple[tuple[str, int], Any]] = {}
    for record in records:
        if record.parent_uuid is None or counts.get(record.uuid, 0):
            continue
        read = functools.partial(core.store.conversation, record.uuid)
        shared, _ = core.prefixes.get(record.parent_uuid, record.fork_message_id, read)
        found[record.uuid] = ((record.parent_uuid, record.fork_message_id), shared)
    return found


async def _per_host(
    batch: list[_Begun],
    call: Callable[[HostAPI, list[_Begun]], Awaitable[list[Exception | None]]],
    part: Callable[[_Begun], object] = lambda item: None,
) -> list[tuple[_Begun, Exception | None]]:
    """`call` once per host (and `part` of the batch) with those items, all at once: each
    item with its error (None: done); a failed call is the error of all its items."""
    groups: dict[tuple[str, object], list[_Begun]] = {}
    for item in batch:
        groups.setdefault((item.state.host_id, part(item)), []).append(item)

    async def one(group: list[_Begun]) -> list[Exception | None]:
        host = group[0].state.host
        try:
            return await asyncio.wait_for(call(host, group), HOST_CALL_TIMEOUT_S)
        except Exception as exc:
            return [exc] * len(group)

    answers = await asyncio.gather(*(one(group) for group in groups.values()))
    return [
        pair
        for group, errors in zip(groups.values(), answers, strict=True)
        for pair in zip(group, errors, strict=True)
    ]
