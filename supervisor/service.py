"""`SupervisorCore`: the control plane's logic: agent tree, turn protocol, routing, placement.

The single writer of the store. Plain asyncio; supervisor/remote.py makes it a Ray actor and
supplies the hosts. Tokens never pass through here.
"""

from __future__ import annotations

import asyncio
import time
import uuid as uuidlib
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from grove.actors.agent import ModelChoice, NewEntry, TurnResult
from grove.actors.estimates import ESTIMATED
from grove.actors.host import Activation, Ticket
from grove.actors.output import OutputType
from grove.actors.telemetry import NO_TRACING, TRACE_KEY, TraceParent, Tracing
from grove.actors.tools.grant import ToolGrant
from grove.providers.base import CachePolicy, Usage
from grove.providers.catalog import ModelSpec
from grove.supervisor.billing import InFlightBilling
from grove.supervisor.budget_rules import Budget, budgeted
from grove.supervisor.children import child_records, instructed
from grove.supervisor.context import CompactionPlan
from grove.supervisor.errors import CommandError, HostDiedError, StoreError, SupervisorError
from grove.supervisor.eventlog import EventLog
from grove.supervisor.fork_cache import ForkCaches
from grove.supervisor.holding import TreeHolding, unheld_agents
from grove.supervisor.prefixes import SharedPrefixes
from grove.supervisor.rules import NO_MODEL_TEXT
from grove.supervisor.store.base import Store
from grove.supervisor.store.kinds import TURN_END_KIND
from grove.supervisor.store.records import AgentRecord, MessageRecord, NewMessage
from grove.supervisor.supervision import RestartIntensity, RestartPolicy, given_up_text
from grove.supervisor.tool_rules import grant_of
from grove.supervisor.turns import (
    HostClient,
    LiveAgent,
    TurnTicket,
    calls_tools,
    choice_of,
    fork_end,
    prompt_data,
    seeded_messages,
    step_events,
    step_message,
    stored_entry,
    turn_events,
    turn_messages,
    turn_open,
    turn_output,
)
from grove.supervisor.worktrees import Workspaces, worktree_of

if TYPE_CHECKING:
    from grove.supervisor.advice import AdvisorDesk

HOST_CALL_TIMEOUT_S = 30.0
ISOLATION_PROCESS = "process"
RECOVERING = "recovering"  # the ticket of a turn that a restarted supervisor runs again


@dataclass(frozen=True, kw_only=True, slots=True)
class Limits:
    """What stops runaway forking: tree depth below a root, children of one agent."""

    fork_depth: int = 4
    children_per_agent: int = 32


class SupervisorCore:
    def __init__(
        self,
        store: Store,
        hosts: Sequence[HostClient],
        spawn_host: Callable[[str], HostClient] | None = None,
        share: Callable[[list[MessageRecord]], Any] = lambda value: value,
        limits: Limits | None = None,
        restart_policy: RestartPolicy | None = None,
    ) -> None:
        if not hosts:
            raise SupervisorError("a supervisor needs at least one host")
        self.store = store
        self.event_log = EventLog(store)
        self.billing = InFlightBilling()  # requests billed by turns not stored yet
        self.hosts = list(hosts)
        self._spawn_host = spawn_host
        # Puts a value where every host can read it (the object store), once per fork point.
        self.prefixes = SharedPrefixes(share)
        self.limits = limits or Limits()
        self.restart_policy = restart_policy or RestartPolicy()
        self._intensity: dict[str, RestartIntensity] = {}
        self.given_up: set[str] = set()  # hosts that died too often to restart again
        self._forked_keys: dict[tuple[str, str], AgentRecord] | None = None
        self.advisors: AdvisorDesk | None = None  # set when the deployment has reviewers
        self.compaction = CompactionPlan()  # `[compaction]`, set by the deployment
        self.cache: CachePolicy | None = None  # `[cache]`, set by the deployment
        self.fork_caches = ForkCaches(self)  # warm-ups before fan-out, explicit entries
        self.tracing: Tracing = NO_TRACING  # roots' `create_agent` spans; set by the deployment
        # Refuses a new turn (count=True) or fork in a tree whose budget is spent; set by the
        # deployment (supervisor/budget.py).
        self.budget_check: Callable[[AgentRecord, bool], None] | None = None
        # Gives back what the requests in flight of an agent whose host died held, counting the
        # tokens and cost of the one it had sent (the same).
        self.release_holds: Callable[[str, int, float], None] | None = None
        self._background: set[asyncio.Task[None]] = set()
        self.workspaces = Workspaces()  # where agents work: set by the deployment
        self._live: dict[str, LiveAgent] = {}
        # Agents made here (roots, forked children): no turn of theirs was cut off.
        self._created: set[str] = set()
        self._load: dict[str, int] = {host.host_id: 0 for host in self.hosts}
        self._session_locks: dict[str, asyncio.Lock] = {}
        # The trees this Grove holds, as the store tells every reader; set by the deployment.
        self.holding: TreeHolding | None = None

    # --- tree -----------------------------------------------------------------------------

    def create_root(
        self,
        spec: ModelSpec | None,
        *,
        system: str | None = None,
        isolation: str | None = None,
        tools: Mapping[str, Any] | None = None,
        trace_parent: str | None = None,
    ) -> AgentRecord:
        """`tools` holds the tool entries of the record's metadata (supervisor/tool_rules.py);
        `trace_parent`: the caller's span, under which the root's trace goes (when traced)."""
        uuid = str(uuidlib.uuid4())
        metadata: dict[str, Any] = dict(tools or {})
        provider, model = (spec.provider, spec.model) if spec else (None, None)
        trace = self.tracing.create_agent(uuid, provider, model, trace_parent)
        if trace is not None:
            metadata[TRACE_KEY] = trace.to_data()
        if "budget" in metadata:
            metadata["budget_root"] = uuid
        if system:
            metadata["system"] = system
        if isolation:
            metadata["isolation"] = isolation
        record = AgentRecord(
            uuid=uuid,
            role="root",
            provider=spec.provider if spec else None,
            model=spec.model if spec else None,
            thinking_level=spec.thinking if spec else None,
            created_at=time.time(),
            metadata=metadata,
        )
        self.store.create_agents([record])
        self.store.set_focus(record.uuid, record.uuid)
        self.event("AgentCreated", agent=record.uuid, role="root")
        self._created.add(record.uuid)
        self.hold(record)
        return record

    def hold(self, record: AgentRecord) -> None:
        """This Grove holds the agent's tree from now on (supervisor/holding.py)."""
        if self.holding is not None:
            self.holding.hold(record)

    def holds(self, uuid: str) -> bool:
        """Whether `hold` of the agent would do nothing (its tree is held, or this Grove
        holds no trees): then its record need not be read for it."""
        return self.holding is None or self.holding.holds(uuid)

    def agent(self, uuid_or_prefix: str) -> AgentRecord:
        return self.store.resolve_agent(uuid_or_prefix)

    def root_of(self, record: AgentRecord) -> AgentRecord:
        while record.parent_uuid is not None:
            parent = self.store.get_agent(record.parent_uuid)
            if parent is None:
                break
            record = parent
        return record

    def descendants(self, uuid: str) -> list[AgentRecord]:
        found: list[AgentRecord] = []
        stack = [uuid]
        while stack:
            for child in self.store.children(stack.pop()):
                found.append(child)
                stack.append(child.uuid)
        return found

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

    # --- placement ------------------------------------------------------------------------

    def live(self, uuid: str, record: AgentRecord | None = None) -> LiveAgent:
        """An agent's live state; placing it on first use (least-loaded shared host, or a
        host of its own for `isolation = "process"`). `record`, when the caller holds it,
        spares a store read."""
        state = self._live.get(uuid)
        if state is None:
            record = record or self.store.get_agent(uuid)
            state = self._live[uuid] = LiveAgent(host=self._place(uuid, record))
            state.turn_done.set()
            if record is not None:
                self.hold(record)
        return state

    def _place(self, uuid: str, record: AgentRecord | None) -> HostClient:
        if record is not None and record.metadata.get("isolation") == ISOLATION_PROCESS:
            if self._spawn_host is None:
                raise SupervisorError("this supervisor cannot start hosts of their own")
            return self._spawn_host(uuid)
        usable = [h for h in self.hosts if h.host_id not in self.given_up]
        if not usable:
            raise SupervisorError("every agent host has failed; see `grove events`")
        host = min(usable, key=lambda h: self._load[h.host_id])
        self._load[host.host_id] += 1
        return host

    def in_flight(self, uuid: str) -> bool:
        """Whether the agent has a turn in flight: on its host, or between hosts until it
        resumes."""
        state = self._live.get(uuid)
        return state is not None and not state.turn_done.is_set()

    def turns_in_flight(self) -> int:
        """How many agents have a turn in flight (as `in_flight` says of one)."""
        return sum(not state.turn_done.is_set() for state in self._live.values())

    def streaming(self, uuid: str) -> bool:
        state = self._live.get(uuid)
        return state is not None and state.ticket_id is not None

    # --- turns ----------------------------------------------------------------------------

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
        if self.budget_check is not None and not resumed:
            self.budget_check(record, True)
        state = self.live(record.uuid, record)
        if state.host.host_id in self.given_up:
            raise SupervisorError(given_up_text(state.host.host_id, self.restart_policy))
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

        Turns of one agent begin one at a time, in arrival order; a turn a restart cut off
        resumes and ends before the agent's first prompt here. Before the first turn on a
        model the host builds the provider and resolves its credentials, so a missing key
        fails here: nothing sent, nothing saved."""
        if text is not None and self.cut_off(uuid):
            await self._finish_cut_off(uuid)
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
        return TurnTicket(ticket=ticket, host_id=state.host.host_id)

    async def fork_many(
        self,
        parent_uuid: str,
        prompts: Sequence[str],
        model: ModelSpec | None,
        system: str | None = None,
        before_start: Callable[[list[AgentRecord]], Awaitable[None]] | None = None,
        keys: Sequence[str] | None = None,
        budget: Budget | None = None,
        workspace: str | None = None,
        output: OutputType | None = None,
    ) -> list[AgentRecord]:
        """Fork one child per prompt in ONE store transaction and start every child's turn:
        one call per host, the inherited prefix shared once through `share`. `system`
        replaces the system prompt the children would inherit; `budget` is one
        the children share, besides their tree's. `keys` make the call idempotent: a child
        already forked from this parent under a key is returned as it is, not forked again
        (a caller repeating a call cut off by a restart), its turn resumed from its last
        stored step when a restart cut it off too. `workspace="worktree"` gives each
        child a git worktree of its own (supervisor/worktrees.py); `output` makes their
        answers typed."""
        parent = self.agent(parent_uuid)
        if not prompts:
            return []
        if keys is not None:
            if len(keys) != len(prompts):
                raise CommandError("fork_many needs one key per prompt")
            forked = self._keyed_children()
            known = {key: forked[parent.uuid, key] for key in keys if (parent.uuid, key) in forked}
            if any(key in known for key in keys):
                for record in known.values():
                    if self.cut_off(record.uuid):
                        self._resume(record, "cut off by a restart")
                fresh = [index for index, key in enumerate(keys) if key not in known]
                made = iter(
                    await self.fork_many(
                        parent_uuid,
                        [prompts[index] for index in fresh],
                        model,
                        system,
                        before_start,
                        [keys[index] for index in fresh],
                        budget,
                        workspace,
                        output,
                    )
                    if fresh
                    else []
                )
                return [known[key] if key in known else next(made) for key in keys]
        if self.budget_check is not None:
            self.budget_check(parent, False)
        point = fork_end(self.store, parent)
        system, prompts = instructed(parent, model, system, prompts)
        records = child_records(parent, model, point, len(prompts), system, budget, keys, output)
        choices = [choice_of(record) for record in records]
        if None in choices:
            raise CommandError(NO_MODEL_TEXT)
        records = await self.workspaces.place(self.store, parent, records, workspace)
        async with self.workspaces.stored(records):
            prompts_stored = self.store.create_agents(
                records,
                [
                    NewMessage(agent_uuid=record.uuid, kind="user", content=prompt)
                    for record, prompt in zip(records, prompts, strict=True)
                ],
            )
        if keys is not None:
            forked = self._keyed_children()
            forked.update(((parent.uuid, key), r) for key, r in zip(keys, records, strict=True))
        # Read now, before any await: later the parent may have moved past the fork point.
        shared, tokens = self.prefixes.get(
            parent.uuid, records[0].fork_message_id, lambda: self.store.conversation(parent.uuid)
        )
        by_host: dict[str, list[tuple[Ticket, Activation]]] = {}
        hosts: dict[str, HostClient] = {}
        # Siblings inherit the same tools: one grant object, which each host call pickles once.
        grant = grant_of(records[0].metadata)
        trace = TraceParent.from_metadata(records[0].metadata)
        for record, stored_prompt, choice in zip(records, prompts_stored, choices, strict=True):
            assert choice is not None
            state = self.live(record.uuid, record)
            ticket = Ticket(
                ticket_id=uuidlib.uuid4().hex,
                uuid=record.uuid,
                user=stored_entry(stored_prompt),
                choice=choice,
                output=output,
                trace=trace,
            )
            state.ticket_id = ticket.ticket_id
            state.turn_done.clear()
            state.active = True
            activation = self.activation(record, history=[], tools=grant)
            by_host.setdefault(state.host.host_id, []).append((ticket, activation))
            hosts[state.host.host_id] = state.host
        await self.children_created(records)
        if before_start is not None:
            await before_start(records)
        prefix = self.fork_caches.prefix(records[0], records[0].fork_message_id, tokens)
        started = await self.fork_caches.start_many(prefix, by_host, hosts, shared)
        for host_id, items, outcome in started:
            if isinstance(outcome, HostDiedError):
                self._retry_unseen(host_id, [ticket for ticket, _ in items])
            elif isinstance(outcome, BaseException):
                raise outcome
        at = records[0].created_at  # the children's, for a reader who asks the store for them
        self.event("AgentsForked", parent=parent.uuid, count=len(records), at=at)
        return records

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

    def answered(self, keys: Sequence[str]) -> dict[str, tuple[str, TurnResult]]:
        """For each key a child was ever forked under (by any parent) and whose turn has a
        stored answer: that child and its answer. A rerun of a batch that was killed takes
        these instead of running the task a second time."""
        wanted = set(keys)
        found: dict[str, tuple[str, TurnResult]] = {}
        for record in self.store.list_agents(include_ended=True):
            key = record.metadata.get("key")
            if key in wanted:
                result = self.stored_result(record.uuid)
                if result is not None:
                    found[key] = (record.uuid, result)
        return found

    def _keyed_children(self) -> dict[tuple[str, str], AgentRecord]:
        """Children forked under a key, by (parent, key): read from the store once per
        supervisor lifetime, then kept up to date as children are forked."""
        if self._forked_keys is None:
            self._forked_keys = {
                (record.parent_uuid, record.metadata["key"]): record
                for record in self.store.list_agents(include_ended=True)
                if record.parent_uuid is not None and "key" in record.metadata
            }
        return self._forked_keys

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

    def background(self, work: Coroutine[Any, Any, None]) -> None:
        """Run `work` as a task this core owns (kept until done, never silently lost)."""
        task = asyncio.get_running_loop().create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background_done)

    def _background_done(self, task: asyncio.Task[None]) -> None:
        self._background.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self.event("BackgroundFailed", error=repr(task.exception()))

    # --- supervision ----------------------------------------------------------------------

    async def host_died(self, host: HostClient, replace: Callable[[], Awaitable[None]]) -> None:
        """A host is gone: replace it (within the restart intensity) and rebuild its agents on
        their next message. Turns it was running are reported interrupted and resume on the new
        host from their last stored step, so their result is still stored exactly once."""
        affected = [(uuid, state) for uuid, state in self._live.items() if state.host is host]
        intensity = self._intensity.setdefault(host.host_id, RestartIntensity(self.restart_policy))
        if not intensity.allow():
            self.given_up.add(host.host_id)
            text = given_up_text(host.host_id, self.restart_policy)
            self.event("HostGivenUp", host=host.host_id, error=text)
            for uuid, state in affected:
                self._lost_with_host(uuid, state)
                self._interrupted(uuid, state, text)
            return
        await replace()
        self.event("HostRestarted", host=host.host_id, agents=len(affected))
        for uuid, state in affected:
            state.active, state.ready_for = False, None
            self._lost_with_host(uuid, state)
            if state.ticket_id is None:
                continue
            self.event("TurnInterrupted", agent=uuid, ticket=state.ticket_id, host=host.host_id)
            state.ticket_id = None  # waiters keep waiting: the resumed turn is this turn's end
            self._schedule_retry(uuid, state)
        if self.advisors is not None:
            await self.advisors.host_replaced(host)

    def _lost_with_host(self, uuid: str, state: LiveAgent) -> None:
        """The agent's host died: what the requests of its turn in flight were billed is
        kept, and what they held of its budgets goes back, a request sent and not answered
        yet counted at its estimate (as `_keep_billed` stores it)."""
        tokens, cost_usd = self._keep_billed(state)
        if self.release_holds is not None:
            self.release_holds(uuid, tokens, cost_usd)

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
        holder = self.holding.holder if self.holding is not None else ""
        reviewers: list[AgentRecord] = []
        cut_off: list[str] = []
        for record in unheld_agents(self.store, holder):
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

    async def children_created(self, children: Sequence[AgentRecord]) -> None:
        """Children forked here (no restart cut a turn of theirs off) get their own reviewers
        when `advisor.subagents` says so, before their first turn (each reviewer's cursor at
        the child's fork point)."""
        self._created.update(child.uuid for child in children)
        if self.advisors is None or not self.advisors.plan.subagents:
            return
        for child in children:
            await self.advisors.attach_all(child.uuid, cursor=child.fork_message_id)

    async def inject(self, uuid: str, message: MessageRecord, *, interrupting: bool) -> None:
        """Hand a stored message (advice) to an agent: an aside waits for its next step
        boundary; interrupting advice steers a streaming turn, or starts one when idle."""
        state = self.live(uuid)
        kind = "steering" if interrupting else message.kind
        if state.ticket_id is not None or (state.active and not interrupting):
            await asyncio.wait_for(
                state.host.steer(uuid, stored_entry(message, kind)), HOST_CALL_TIMEOUT_S
            )
        elif interrupting:
            await self.begin_turn(uuid, None, entry=stored_entry(message, kind))

    # --- routing --------------------------------------------------------------------------

    async def deliver_mail(self, sender: str, recipient: str, text: str) -> MessageRecord:
        """Store mail for a running agent; it reaches the model at its next step boundary."""
        record = self.agent(recipient)
        if record.status != "running":
            raise CommandError(f"Agent {record.uuid} is {record.status}")
        data = {"sender": sender}
        message = self.store.append_message(record.uuid, "mail", text, data)
        state = self.live(record.uuid)
        if state.active:
            entry = stored_entry(message)
            await asyncio.wait_for(state.host.steer(record.uuid, entry), HOST_CALL_TIMEOUT_S)
        state.mail.put_nowait(message)
        self.event("MailDelivered", sender=sender, recipient=record.uuid, message_id=message.id)
        return message

    def turn_end(self, uuid: str) -> asyncio.Event | None:
        """What is set when the agent's turn in flight (or its retry) ends; None: it has none."""
        state = self._live.get(uuid)
        return None if state is None or state.turn_done.is_set() else state.turn_done

    # --- events ---------------------------------------------------------------------------

    def event(self, kind: str, **payload: Any) -> None:
        self.event_log.record(kind, payload)

    def session_lock(self, root_uuid: str) -> asyncio.Lock:
        lock = self._session_locks.get(root_uuid)
        if lock is None:
            lock = self._session_locks[root_uuid] = asyncio.Lock()
        return lock
