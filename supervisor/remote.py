"""The Ray face of supervisor/: the `Supervisor` named actor and its hosts (RayProxy[HostAPI]).

All Ray calls of supervisor/ are here; the logic lives in core/ and commands/.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
from dataclasses import dataclass, field
from typing import Any

import ray
from grove.actors.remote import AgentHost, HostSettings
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from grove.actors.advisor_messages import ReviewReport
from grove.actors.agent import NewEntry, TurnResult
from grove.actors.collector import tune_collector
from grove.actors.contract import HostAPI
from grove.actors.host import Ticket
from grove.actors.output import OutputType
from grove.actors.ray_proxy import RayProxy, waited
from grove.actors.telemetry import start_tracing
from grove.actors.tools.todo import TodoError, from_markdown, to_data, to_markdown
from grove.providers.errors import GroveError
from grove.providers.model_specs import ModelSpec
from grove.providers.pricing import set_prices
from grove.providers.stream_events import RateLimitLeft
from grove.supervisor.advisor_plan import AdvisorPlan, ReviewerConfig
from grove.supervisor.agent_tools import tool_call
from grove.supervisor.approvals import ApprovalDesk
from grove.supervisor.budget import BUDGET_POLL_S, BudgetDesk, BudgetExhausted, Hold
from grove.supervisor.budget_rules import Budget
from grove.supervisor.commands.bus import dispatch
from grove.supervisor.commands.registry import CommandOutcome
from grove.supervisor.compaction import recover
from grove.supervisor.context import CompactionPlan
from grove.supervisor.core import SupervisorCore
from grove.supervisor.core.coalesced_turns import begin_turns
from grove.supervisor.core.parts import HOST_CALL_TIMEOUT_S, CoreParts, Limits
from grove.supervisor.errors import CommandError, HostDiedError, StoreError
from grove.supervisor.fleet import FleetLimiter, ProviderLimits
from grove.supervisor.forking import fork_child
from grove.supervisor.holding import HOLDER_RENEW_S, new_holder
from grove.supervisor.store import open_store
from grove.supervisor.store.records import AgentRecord, MessageRecord
from grove.supervisor.supervision import RestartPolicy
from grove.supervisor.toolbox import decode_source
from grove.supervisor.turns import Begun, TurnTicket
from grove.supervisor.worktrees import Workspaces

NAMESPACE = "grove"
HOST_PING_INTERVAL_S = 1.0
HOST_PING_TIMEOUT_S = 10.0
SUPERVISOR_NAME = "grove-supervisor"
RESUME_POLL_S = 0.05  # how often a reader asks whether a resumed turn has begun


@dataclass(frozen=True, kw_only=True, slots=True)
class SupervisorSettings:
    store_url: str | None
    hosts: int
    host_settings: HostSettings
    aliases: dict[str, str]
    limits: Limits = field(default_factory=Limits)
    advisor: AdvisorPlan = field(default_factory=AdvisorPlan)
    restart_policy: RestartPolicy = field(default_factory=RestartPolicy)
    compaction: CompactionPlan = field(default_factory=CompactionPlan)
    rate_limits: dict[str, ProviderLimits] = field(default_factory=dict)
    fork_workspace: str = "shared"  # `[tools] workspace`: where children work by default
    # Its name among the store's holders: the same after Ray restarts the supervisor.
    holder: str = field(default_factory=new_holder)


@ray.remote
class Supervisor:
    """One per deployment, named `grove-supervisor` in the `grove` namespace."""

    def __init__(self, settings: SupervisorSettings) -> None:
        tune_collector()
        set_prices(settings.host_settings.prices)
        self.settings = settings
        self._run_id = secrets.token_hex(3)
        self._host_nodes: dict[str, str] = {}  # host id -> the Ray node it was placed on
        # Every host, by id, behind its contract: the shared ones and those of an agent's own.
        self.hosts: dict[str, RayProxy[HostAPI]] = {}
        for index in range(settings.hosts):
            self._add_host(f"host-{index}")
        self._death_lock = asyncio.Lock()
        self._monitor: asyncio.Task[None] | None = None
        self.core = SupervisorCore(
            CoreParts(
                store=open_store(settings.store_url),
                hosts={host_id: proxy.call for host_id, proxy in self.hosts.items()},
                spawn_host=self._spawn_host,
                share=ray.put,
                limits=settings.limits,
                restart_policy=settings.restart_policy,
                advisor=settings.advisor,
                compaction=settings.compaction,
                cache=settings.host_settings.cache,
                tracing=start_tracing(settings.host_settings.telemetry),
                workspaces=Workspaces(settings.host_settings.workspace, settings.fork_workspace),
                holder=settings.holder,
            ),
            budgets=self._budget_desk,
        )
        advisors = self.core.advisors
        assert advisors is not None  # built from `settings.advisor`, which is always given
        self.advisors = advisors
        self.fleet = FleetLimiter(settings.rate_limits)
        self.approvals = ApprovalDesk(self.core)
        self.holding = self.core.holding
        self.holding.renew()
        self._holding: asyncio.Task[None] | None = None

    def _budget_desk(self, core: SupervisorCore) -> BudgetDesk:
        """The core's budgets, kept here too for the hosts' budget calls."""
        self.budgets = BudgetDesk(core)
        return self.budgets

    def _new_host(self, host_id: str, incarnation: int = 0) -> Any:
        # A name of this supervisor's own: after a restart, the old hosts' names may linger.
        name = f"grove-{host_id}-{self._run_id}-{incarnation}"
        return AgentHost.options(
            name=name,
            namespace=NAMESPACE,
            scheduling_strategy=self._spread(host_id),
        ).remote(host_id, self.settings.host_settings, ray.get_runtime_context().current_actor)

    def _spread(self, host_id: str) -> NodeAffinitySchedulingStrategy:
        """The live node with the fewest of this supervisor's hosts (Ray's own "SPREAD" is
        best effort and often puts two hosts on one node). Soft: if that node goes before the
        host starts, Ray places it elsewhere."""
        self._host_nodes.pop(host_id, None)
        nodes: list[dict[str, Any]] = ray.nodes()  # type: ignore[no-untyped-call]
        alive = sorted(node["NodeID"] for node in nodes if node["Alive"])
        placed = list(self._host_nodes.values())
        node_id = min(alive, key=placed.count)
        self._host_nodes[host_id] = node_id
        return NodeAffinitySchedulingStrategy(node_id, soft=True)

    def _add_host(self, host_id: str) -> RayProxy[HostAPI]:
        """A new host actor behind its contract: when it dies under a call, it is replaced
        (`_host_died`) before the caller gets HostDiedError."""

        async def died(proxy: RayProxy[HostAPI], incarnation: int) -> None:
            await self._host_died(host_id, proxy, incarnation)

        def death_error(_: BaseException) -> Exception:
            return HostDiedError(
                f"host {host_id} died; its agents are rebuilt on their next message"
            )

        proxy = RayProxy[HostAPI](
            self._new_host(host_id), HostAPI, on_death=died, death_error=death_error
        )
        self.hosts[host_id] = proxy
        return proxy

    def _spawn_host(self, uuid: str) -> tuple[str, HostAPI]:
        """A host process of the agent's own (`isolation = "process"`)."""
        host_id = f"solo-{uuid}"
        return host_id, self._add_host(host_id).call

    async def _host_died(self, host_id: str, proxy: RayProxy[HostAPI], incarnation: int) -> None:
        """Replace a dead host once, however many callers noticed its death."""
        async with self._death_lock:
            if proxy.incarnation != incarnation:
                return  # already replaced

            async def replace() -> None:
                proxy.replace(self._new_host(host_id, proxy.incarnation + 1))
                await asyncio.wait_for(waited(proxy.call.ping()).ref(), HOST_CALL_TIMEOUT_S * 2)

            try:
                await self.core.host_died(host_id, proxy.call, replace)
            except (TimeoutError, ray.exceptions.RayError):
                # The replacement died too: that counts as the next death of this host.
                self.core.background(self._host_died(host_id, proxy, proxy.incarnation))

    async def _watch_hosts(self) -> None:
        """Every second, ping each host; a dead one is replaced (supervision never dies
        from one failed step)."""
        while True:
            await asyncio.sleep(HOST_PING_INTERVAL_S)
            for host_id, proxy in list(self.hosts.items()):
                if host_id in self.core.given_up:
                    continue
                incarnation = proxy.incarnation
                try:
                    await asyncio.wait_for(waited(proxy.call.ping()).ref(), HOST_PING_TIMEOUT_S)
                except ray.exceptions.RayActorError:
                    await self._host_died(host_id, proxy, incarnation)
                except (TimeoutError, ray.exceptions.RayError) as exc:
                    self.core.event("HostSlow", host=host_id, error=repr(exc))

    async def _keep_holding(self) -> None:
        """Every few seconds, tell the store this Grove lives on (a store that cannot be
        reached is asked again next time; the event log says why)."""
        while True:
            await asyncio.sleep(HOLDER_RENEW_S)
            try:
                self.holding.renew()
            except StoreError as exc:
                with contextlib.suppress(StoreError):
                    self.core.event("HolderNotRenewed", holder=self.holding.holder, error=str(exc))

    async def let_go(self) -> None:
        """The Grove ends: the trees it held show `stopped` at once."""
        if self._holding is not None:
            self._holding.cancel()
        self.holding.let_go()

    def _wake(self) -> None:
        """Start what runs in the background once the actor's event loop is there (it is not
        in __init__): host supervision and, after a restart, recovery from the store."""
        if self._monitor is None:
            loop = asyncio.get_running_loop()
            self._monitor = loop.create_task(self._watch_hosts())
            self._holding = loop.create_task(self._keep_holding())
            if ray.get_runtime_context().was_current_actor_reconstructed:
                restarted = self.core.recover()
                self.core.event("SupervisorStarted", pid=os.getpid(), turns_restarted=restarted)

    async def ready(self) -> dict[str, Any]:
        self._wake()
        pings = await asyncio.gather(*(waited(p.call.ping()).ref() for p in self.hosts.values()))
        return {"pid": os.getpid(), "hosts": pings}

    def host(self, host_id: str) -> Any:
        return self.hosts[host_id].handle

    async def flush_telemetry(self) -> None:
        """Export the spans every live host and this supervisor have ended (before Grove
        stops them: a killed process's spans in waiting would be lost)."""
        live = [p for host_id, p in self.hosts.items() if host_id not in self.core.given_up]
        await asyncio.gather(
            *(asyncio.wait_for(waited(p.call.flush_telemetry()).ref(), 30) for p in live),
            return_exceptions=True,
        )
        await asyncio.to_thread(self.core.tracing.flush)

    async def host_pids(self) -> dict[str, int]:
        """For operators and tests: the process id of each live host."""
        self._wake()
        pings = {}
        for host_id, proxy in self.hosts.items():
            if host_id not in self.core.given_up:
                with contextlib.suppress(ray.exceptions.RayError, TimeoutError):
                    ping = await asyncio.wait_for(waited(proxy.call.ping()).ref(), 5)
                    pings[host_id] = ping["pid"]
        return pings

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
        if self.settings.advisor.enabled:
            await self.advisors.attach_all(record.uuid)
        return record

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
        self, requests: list[tuple[str, str, int, int | None]]
    ) -> list[tuple[str, Any]]:
        """Before requests of budgeted agents, `(agent, model, input tokens, max_tokens)` each:
        `("held", the hold)`, `("refused", why)` when it would pass a limit, or `("wait",
        seconds)` while requests in flight hold the room."""
        answers: list[tuple[str, Any]] = []
        for uuid, model, tokens, max_tokens in requests:
            try:
                hold = self.budgets.try_reserve(uuid, model, tokens, max_tokens)
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

    async def fork_many(
        self,
        parent: str,
        prompts: list[str],
        model: ModelSpec | None,
        system: str | None = None,
        advisor: ModelSpec | None = None,
        keys: list[str] | None = None,
        budget: Budget | None = None,
        workspace: str | None = None,
        output: OutputType | None = None,
    ) -> list[str]:
        """`advisor`: a reviewer on that model watches every child from its first turn;
        `budget`: the children (and theirs) draw on it, besides their tree's budget;
        `workspace`: "shared" or "worktree" (default: `[tools] workspace`); `output`: their
        answers are typed."""
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
            workspace=workspace,
            output=output,
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
    ) -> AgentRecord:
        """One child of `parent`, as a model's `fork` tool makes it; its first turn starts
        when there is a prompt."""
        self._wake()
        record = self.core.agent(parent)
        forked = await fork_child(
            self.core, record, model, prompt=prompt, origin="api", tools=tools, workspace=workspace
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
        state = self.core.live(self.core.agent(uuid).uuid)
        state.released.set()  # a turn waiting on its reviewers' backlog goes on at once
        await self.advisors.release_waiters()
        return await state.host.cancel(uuid)

    async def route_mail(self, batch: list[tuple[str, str, str]]) -> list[int]:
        return await self.core.route_mail(batch)

    async def dispatch(self, session: str, line: str, origin: str) -> CommandOutcome:
        self._wake()
        record = None if self.core.holds(session) else self.core.store.get_agent(session)
        if record is not None:  # a session resumed here is held from its first command on
            self.core.hold(record)
        return await dispatch(
            self.core, session, line, origin=origin, aliases=self.settings.aliases
        )

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
