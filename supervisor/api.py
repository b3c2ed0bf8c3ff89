"""`Grove`: the Python API for programs and for Grove's own CLI.

Starts or joins Ray, finds or starts the supervisor, and streams turns straight from hosts.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import functools
import inspect
import json
import os
import secrets
import threading
import time
import uuid as uuidlib
import weakref
from collections.abc import Awaitable, Callable, Iterator, Sequence
from concurrent.futures import Future
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ray
from grove.actors.remote import HostSettings
from pydantic import BaseModel
from ray._raylet import _set_future_helper as set_future_result

from grove.actors.agent import TurnResult
from grove.actors.coalesce import Coalescer
from grove.actors.output import OutputType
from grove.actors.telemetry import caller_traceparent
from grove.actors.tools.grant import MCP_PREFIX
from grove.actors.tools.mcp import ListedTool, McpServerConfig, list_server_tools
from grove.actors.tools.sandbox import SandboxPolicy
from grove.providers.base import DEFAULT_OUTPUT_RETRIES
from grove.providers.errors import GroveError, ModelSpecError
from grove.providers.http import Endpoint
from grove.providers.lifecycle import chosen_model
from grove.providers.model_specs import ModelSpec
from grove.supervisor import bridge
from grove.supervisor.advisor_plan import AdvisorPlan, ReviewerConfig
from grove.supervisor.approvals import ApprovalRequest
from grove.supervisor.batch.runner import DEFAULT_CONCURRENCY, BatchRunner, Step
from grove.supervisor.batch.tasks import Task
from grove.supervisor.budget_rules import Budget
from grove.supervisor.commands.registry import CommandOutcome
from grove.supervisor.config import GroveSettings, load_settings
from grove.supervisor.context import CompactionPlan
from grove.supervisor.core.coalesced_turns import TurnRequest
from grove.supervisor.core.parts import Limits
from grove.supervisor.errors import CommandError, SupervisorError, TurnTimeout
from grove.supervisor.fleet import ProviderLimits
from grove.supervisor.host_deaths import host_died_notice
from grove.supervisor.local_ray import LocalRay, start_ray
from grove.supervisor.model_table import model_rows
from grove.supervisor.output_types import OutputTypeLike, model_of, typed
from grove.supervisor.output_types import output_type as make_output
from grove.supervisor.actor import NAMESPACE, SUPERVISOR_NAME, Supervisor, SupervisorSettings
from grove.supervisor.store import open_store, store_files
from grove.supervisor.store.records import AgentRecord, MessageRecord
from grove.supervisor.supervision import RestartPolicy
from grove.supervisor.telemetry import telemetry_settings
from grove.supervisor.tool_rules import is_mcp, mcp_servers, policy_for
from grove.supervisor.toolbox import resolve_tools
from grove.supervisor.trace_printer import printing_spans
from grove.supervisor.turn_results import TurnResults
from grove.supervisor.turns import Begun
from grove.supervisor.worktrees import WorktreeRow, worktree_rows

CALL_TIMEOUT_S = 60.0
Approver = Callable[[ApprovalRequest], str | Awaitable[str]]
SUPERVISOR_RESTART_WAIT_S = 120.0
RESUME_WAIT_S = 120.0  # how long a reader waits for a turn cut off by its host to resume
# Calls that change nothing, or that are idempotent (fork_many with keys): repeated after a
# supervisor restart instead of failing.
REPEATABLE_CALLS = frozenset(
    {
        "ready",
        "wait_any",
        "wait_turn",
        "conversation",
        "agent",
        "focus",
        "streaming",
        "turns_in_flight",
        "host_pids",
        "provider_identity",
        "advice",
        "wait_reviews",
        "fork_many",
    }
)


# How many host deaths in a row one reader follows a turn across before it stops reading.
MAX_FOLLOWS = 20


def got(ref: Any, timeout_s: float | None) -> Any:
    """An actor call's result: awaited by the caller's loop for an AsyncGrove, else waited
    for here (supervisor/bridge.py)."""
    if bridge.bridged():
        return bridge.awaited(awaitable_result(ref, timeout_s))
    return ray.get(ref, timeout=timeout_s)


def awaitable_result(ref: Any, timeout_s: float | None) -> asyncio.Future[Any]:
    """An actor call's result as a future of the running loop (TimeoutError after
    `timeout_s`), settled from Ray's callback: no thread-safe future, no task and no timer
    task between (an AsyncGrove fan-out has thousands in flight)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    expiry = None if timeout_s is None else loop.call_later(timeout_s, _expire, future)
    # Ray calls it on its own thread; it keeps `ref` alive until then.
    ref._on_completed(functools.partial(_completed, loop, future, expiry, ref))
    return future


def _completed(
    loop: asyncio.AbstractEventLoop,
    future: asyncio.Future[Any],
    expiry: asyncio.TimerHandle | None,
    _ref: Any,
    result: Any,
) -> None:
    with contextlib.suppress(RuntimeError):  # the loop has closed: nobody awaits it now
        loop.call_soon_threadsafe(_settle, future, expiry, result)


def _settle(future: asyncio.Future[Any], expiry: asyncio.TimerHandle | None, result: Any) -> None:
    """`result` (an exception object for a failed call) into `future`, as Ray's own
    futures take it."""
    if expiry is not None:
        expiry.cancel()
    set_future_result(result, py_future=future)  # nothing when the future is done


def _expire(future: asyncio.Future[Any]) -> None:
    if not future.done():
        future.set_exception(TimeoutError())


def streamed(supervisor: Any, agent: str, ticket: str, stream: Any) -> Iterator[tuple[str, str]]:
    """The deltas of a host's streaming generator (of the turn `ticket`), each chunk waited
    for as `got` does; when its host dies, a notice, then those of the turn resumed on
    another host, from its resumption on."""
    for _ in range(MAX_FOLLOWS):
        try:
            while True:
                try:
                    ref = bridge.awaited(stream.__anext__()) if bridge.bridged() else next(stream)
                except (StopIteration, StopAsyncIteration):
                    return
                yield from got(ref, CALL_TIMEOUT_S * 10)
        except ray.exceptions.RayActorError as exc:
            yield host_died_notice(str(exc))  # Grove's line for it; Ray's report is not shown
        resumed = got(
            supervisor.resumed_host.remote(agent, ticket, RESUME_WAIT_S), RESUME_WAIT_S + 30
        )
        if resumed is None:
            return
        host, ticket = resumed
        stream = host.watch.options(num_returns="streaming").remote(agent, ticket)


def _raise_unless_repeatable(method: str, exc: Exception, deadline: float) -> None:
    """After a supervisor call failed with `exc`: raise what its caller is to see (a Grove
    error as itself), or return when the call is to be repeated after the restart."""
    if isinstance(exc, ray.exceptions.RayTaskError):
        if isinstance(exc.cause, GroveError):
            raise exc.cause from None
        raise exc
    if method not in REPEATABLE_CALLS:
        raise SupervisorError(
            f"the supervisor restarted during {method}; it may or may not have "
            "taken effect (check `grove agents`)"
        ) from exc
    if time.monotonic() > deadline:
        raise SupervisorError(
            f"the supervisor did not come back within {SUPERVISOR_RESTART_WAIT_S:g} s"
        ) from exc


def _join_or_make_supervisor(settings: SupervisorSettings) -> tuple[Any, bool]:
    """The supervisor running in this Ray, joined (False), else one made with `settings`
    (True: its maker stops it at close, so the next Grove in this Ray starts its own)."""
    with contextlib.suppress(ValueError):
        return ray.get_actor(SUPERVISOR_NAME, namespace=NAMESPACE), False
    try:
        made = Supervisor.options(  # type: ignore[attr-defined]
            name=SUPERVISOR_NAME,
            namespace=NAMESPACE,
            max_restarts=-1,  # Ray starts it again; it recovers from the store
            max_task_retries=0,  # a call cut off by a restart is not replayed blindly
        ).remote(settings)
    except ValueError:  # the name was taken after the look: another Grove made it
        return ray.get_actor(SUPERVISOR_NAME, namespace=NAMESPACE), False
    return made, True


# How an asyncio caller awaits a turn's result with the others its loop awaits: (host,
# ticket, timeout) to the result, or None for the host to be asked alone.
ResultWait = Callable[[Any, str, float], Awaitable[TurnResult | None]]


@dataclass(frozen=True, slots=True)
class _LoopTurns:
    """An asyncio loop's asks made at once: begun together, their results asked for
    together."""

    starts: Coalescer[TurnRequest, Any]
    results: TurnResults


class Turn:
    """A turn in progress: iterate for `(kind, text)` deltas; `result()` waits for its end.

    When the host dies under it, a notice comes, then the deltas of the turn resumed on
    another host (from its last stored step on), and `result()` answers from the supervisor
    with the resumed turn's result."""

    def __init__(
        self,
        ticket_id: str,
        agent: str,
        host: Any,
        supervisor: Any,
        on_approval: Callable[[str], None] | None = None,
        output_model: type[BaseModel] | None = None,
        results: ResultWait | None = None,
    ) -> None:
        """`results`: how an asyncio caller awaits the result with others at once."""
        self.ticket_id = ticket_id
        self.output_model = output_model  # a typed answer is read into it
        self.agent = agent
        self._host = host
        self._supervisor = supervisor
        self._on_approval = on_approval
        self._results = results
        self._read = False

    def __iter__(self) -> Iterator[tuple[str, str]]:
        """The turn's deltas; an approval request goes to the session's approver instead."""
        self._read = True
        stream = self._host.stream.options(num_returns="streaming").remote(self.ticket_id)
        for kind, text in streamed(self._supervisor, self.agent, self.ticket_id, stream):
            if kind == "approval" and self._on_approval is not None:
                self._on_approval(text)
            else:
                yield kind, text

    def result(self, timeout_s: float = 3600.0) -> TurnResult:
        if self._on_approval is not None and not self._read:
            for _ in self:  # approval requests arrive in the stream: someone must read it
                pass
        try:
            result = self._result_within(timeout_s)
        except TimeoutError:  # Ray's or the loop's: said as a RemoteTurn says it
            result = None
        if result is None:
            raise TurnTimeout(self.agent, timeout_s)
        return self.typed(result)

    def _result_within(self, timeout_s: float) -> TurnResult | None:
        """The host's result of the turn, or, when the host died under it, the supervisor's of
        the turn resumed elsewhere (None: it did not end in time)."""
        try:
            return self._host_result(timeout_s)
        except ray.exceptions.RayActorError:
            waiting = self._supervisor.wait_turn.remote(self.agent, timeout_s)
            resumed: TurnResult | None = got(waiting, timeout_s + 30)
            return resumed

    def batched_result(self, timeout_s: float) -> Awaitable[TurnResult | None] | None:
        """For an asyncio caller: the host's result of the turn, to await together with the
        others its loop awaits at once (supervisor/turn_results.py); None when there is no
        such batching or approval requests are still to be read first. When it gives None,
        or raises RayActorError, `result` knows what to do next."""
        if self._results is None or (self._on_approval is not None and not self._read):
            return None
        return self._results(self._host, self.ticket_id, timeout_s)

    def typed(self, result: TurnResult) -> TurnResult:
        """The turn's result with its answer read into its output model, if it has one."""
        return typed(result, self.output_model)

    def _host_result(self, timeout_s: float) -> TurnResult:
        """The host's result of the turn: for an asyncio caller, asked for together with
        the others its loop awaits at once."""
        if bridge.bridged() and (waiting := self.batched_result(timeout_s)) is not None:
            found = bridge.awaited(waiting)
            if found is not None:
                return found
        result: TurnResult = got(self._host.result.remote(self.ticket_id), timeout_s)
        return result


class Grove:
    """`with Grove(simulate=True) as grove: root = grove.create_root("claude-sonnet-5-5")`."""

    def __init__(
        self,
        *,
        settings: GroveSettings | None = None,
        simulate: bool = False,
        hosts: int | None = None,
        endpoint: Endpoint | None = None,
    ) -> None:
        """`endpoint` fixes URL and key for every provider, e.g. a simulator running in
        another process (`grove simulate`); `simulate=True` starts one in this process."""
        self.settings = settings or load_settings()
        self.simulate = simulate
        self.endpoint = endpoint
        self.hosts = hosts or self.settings.hosts.count or max(os.cpu_count() or 1, 1)
        self._stack = ExitStack()
        self._started_ray = False
        self._local_ray: LocalRay | None = None
        self._made_supervisor = False  # this Grove made the supervisor (and so stops it)
        self._approvers: dict[str, Approver] = {}
        # The pydantic models typed answers are read into, by agent (create_root, fork_many).
        self._output_models: dict[str, type[BaseModel]] = {}
        # The tools of each MCP server configuration this Grove has listed or is listing
        # (`_mcp_tools`), settled by whoever lists it; the lock guards the dict, no wait.
        self._mcp_listings: dict[McpServerConfig, Future[list[ListedTool]]] = {}
        self._mcp_lock = threading.Lock()
        self.supervisor: Any = None
        # Per asyncio loop, the asks it makes at once: begun together (`_begin_turn`), their
        # results asked for together (`_await_result`).
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopTurns] = (
            weakref.WeakKeyDictionary()
        )
        self._result_wait: ResultWait = self._await_result  # one for all its turns
        self.traced = False  # spans are exported (`[telemetry]`, OTEL_*: supervisor/telemetry.py)

    def __enter__(self) -> Grove:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        telemetry = telemetry_settings(self.settings.telemetry)
        if telemetry is not None and telemetry.printed is not None:  # no collector: print here
            telemetry = self._stack.enter_context(printing_spans(telemetry))
        if not ray.is_initialized():
            self._local_ray = start_ray(self.settings.address, NAMESPACE)
            self._started_ray = True
        simulator = self._start_simulator() if self.simulate else self.endpoint
        providers = self.settings.providers
        host_settings = HostSettings(
            base_urls={
                name: providers.for_provider(name).base_url
                for name in ("anthropic", "openai", "google")
            },
            openai_api=providers.openai.api,
            simulator=simulator,
            retry=providers.retry.policy(),
            idle_release_s=self.settings.hosts.idle_release_s,
            idle_pools=self.settings.hosts.idle_pools,
            tool_steps=self.settings.limits.tool_steps,
            durable_steps=self.settings.hosts.durable_steps,
            workspace=str(Path.cwd()),
            sandbox=self._sandbox_policy(),
            mcp_servers=mcp_servers(self.settings),
            compaction_threshold=(
                self.settings.compaction.threshold if self.settings.compaction.enabled else None
            ),
            limited_providers=frozenset(
                name for name, chosen in self._rate_limits().items() if chosen.any
            ),
            prices=dict(self.settings.models.prices),
            cache=self.settings.cache.policy(),
            telemetry=telemetry,
            review_retry_s=self.settings.advisor.retry_delay_s,
        )
        settings = SupervisorSettings(
            store_url=self.settings.store,
            hosts=self.hosts,
            host_settings=host_settings,
            aliases=dict(self.settings.models.aliases),
            limits=Limits(
                fork_depth=self.settings.limits.fork_depth,
                children_per_agent=self.settings.limits.children_per_agent,
            ),
            advisor=self._advisor_plan(),
            restart_policy=RestartPolicy(
                max_restarts=self.settings.hosts.max_restarts,
                window_s=self.settings.hosts.restart_window_s,
            ),
            compaction=self._compaction_plan(),
            rate_limits=self._rate_limits(),
            fork_workspace=self.settings.tools.workspace,
        )
        self.supervisor, self._made_supervisor = _join_or_make_supervisor(settings)
        got(self.supervisor.ready.remote(), CALL_TIMEOUT_S * 2)
        self.traced = telemetry is not None
        if self.traced:
            atexit.register(self.flush_telemetry)  # a program that never closes its Grove

    def _sandbox_policy(self) -> SandboxPolicy:
        """`[tools.sandbox]`, hiding the store's files besides what it names."""
        section = self.settings.tools.sandbox
        return SandboxPolicy(
            mode=section.mode,
            network=section.network,
            writable=tuple(section.writable),
            hidden=(*section.hidden, *store_files(self.settings.store)),
            limits=section.limits(),
            env=tuple(section.env),
        )

    def _rate_limits(self) -> dict[str, ProviderLimits]:
        providers = self.settings.providers
        return {
            name: ProviderLimits(
                rpm=providers.for_provider(name).rpm,
                tpm=providers.for_provider(name).tpm,
                max_concurrency=providers.for_provider(name).max_concurrency,
            )
            for name in ("anthropic", "openai", "google")
        }

    def _compaction_plan(self) -> CompactionPlan:
        section = self.settings.compaction
        model = self._spec(section.model, "[compaction] model: ")
        return CompactionPlan(
            enabled=section.enabled,
            threshold=section.threshold,
            keep_recent_tokens=section.keep_recent_tokens,
            model=model,
            strategy=section.strategy,
        )

    def _advisor_plan(self) -> AdvisorPlan:
        """The advisor settings resolved here, where the workspace and WATCHDOG.md live."""
        from grove.actors.watchdog import watchdog_prompt

        section = self.settings.advisor
        workspace = Path.cwd()
        aliases = self.settings.models.aliases
        try:
            reviewers = tuple(
                ReviewerConfig(
                    name=reviewer.name,
                    model=chosen_model(reviewer.model, aliases),
                    prompt=reviewer.prompt,
                )
                for reviewer in section.reviewer_sections()
            )
        except ModelSpecError as exc:
            raise CommandError(f"[advisor] model: {exc}") from exc
        return AdvisorPlan(
            enabled=section.enabled,
            subagents=section.subagents,
            sync_backlog=section.sync_backlog,
            reviewers=reviewers,
            workspace=str(workspace),
            watchdog=watchdog_prompt(workspace),
        )

    def _start_simulator(self) -> Endpoint:
        from grove.simulator import SimulatorConfig, SimulatorThread

        key = "sim-" + secrets.token_hex(16)
        simulator = self._stack.enter_context(SimulatorThread(SimulatorConfig(port=0, api_key=key)))
        return Endpoint(base_url=simulator.base_url, api_key=key)

    def flush_telemetry(self) -> None:
        """Export the spans the supervisor and every host have ended (closing does it)."""
        if self.traced and self.supervisor is not None:
            with contextlib.suppress(GroveError, ray.exceptions.RayError, TimeoutError):
                self._call("flush_telemetry")

    def close(self) -> None:
        if self.traced:
            self.flush_telemetry()
            atexit.unregister(self.flush_telemetry)
            self.traced = False
        if self.supervisor is not None and (self._started_ray or self._made_supervisor):
            with contextlib.suppress(GroveError, ray.exceptions.RayError):
                self.release_caches()  # a provider-side entry must not outlive its Grove
            with contextlib.suppress(GroveError, ray.exceptions.RayError):
                self._call("let_go", timeout_s=10.0)  # its trees show `stopped` at once
            ray.kill(self.supervisor)  # its hosts are its own actors: they go with it
            self.supervisor = None
            self._made_supervisor = False
        if self._started_ray:
            ray.shutdown()
            self._started_ray = False
        if self._local_ray is not None:
            self._local_ray.stop()
            self._local_ray = None
        self._stack.close()

    def _call(self, method: str, *args: Any, timeout_s: float = CALL_TIMEOUT_S) -> Any:
        """Call the supervisor; a Grove error raised there is raised here as itself. When the
        supervisor dies under a call, a call that is safe to repeat waits for its restart and
        is repeated; any other gets a clear SupervisorError, never a hang."""
        deadline = time.monotonic() + SUPERVISOR_RESTART_WAIT_S
        while True:
            try:
                return got(getattr(self.supervisor, method).remote(*args), timeout_s)
            except (ray.exceptions.RayTaskError, ray.exceptions.RayActorError) as exc:
                _raise_unless_repeatable(method, exc, deadline)
            bridge.sleep(0.5)

    def create_root(
        self,
        model: str | None = None,
        *,
        system: str | None = None,
        isolation: str | None = None,
        tools: Sequence[str | Callable[..., Any]] | str | Callable[..., Any] | None = None,
        allow: Sequence[str] = (),
        approver: Approver | None = None,
        budget: Budget | None = None,
        output_type: OutputTypeLike | None = None,
        output_retries: int = DEFAULT_OUTPUT_RETRIES,
    ) -> AgentRecord:
        """A new root agent; `isolation="process"` gives it a host process of its own.
        `tools`: built-in tool names (fork, send, wait, todo, read, search, find, write, edit,
        bash), Python functions and `package.module:attr` strings; their code goes with the
        agent to whichever node runs it. `allow` names tools to run without asking, over the
        `[tools.policy]` of the config; `approver` answers for the tools to ask about
        (see `set_approver`). `budget` limits the whole tree (children and reviewers draw on
        it); without one, `[budget]` of the config applies, if set. `output_type` (a pydantic
        model or a JSON schema dict) makes every answer of the agent typed: `TurnResult.output`
        is the checked answer, a malformed one goes back to the model `output_retries`
        times."""
        spec = self._spec(model or self.settings.defaults.model)
        if tools is None:
            tools = ()
        elif isinstance(tools, str) or callable(tools):
            tools = [tools]  # one tool given on its own
        resolved = resolve_tools(tools)
        entries = resolved.metadata() if resolved.names else {}
        mcp = self._mcp_tools(resolved.names)
        if mcp:
            entries["mcp_tools"] = mcp
        if resolved.names:
            entries["tool_policy"] = self._tool_policy(resolved.names, allow)
        limits = budget.as_dict() if budget is not None else self.settings.budget.budget()
        if limits is not None:
            entries["budget"] = limits
        if output_type is not None:
            provider = spec.provider if spec else None
            entries["output"] = make_output(output_type, output_retries, provider).to_data()
        trace_parent = caller_traceparent() if self.traced else None
        record: AgentRecord = self._call(
            "create_root", spec, system, isolation, entries, trace_parent
        )
        self._remember_model([record.uuid], output_type)
        if approver is not None:
            self.set_approver(record.uuid, approver)
        return record

    def _remember_model(self, agents: Sequence[str], output_type: OutputTypeLike | None) -> None:
        model = model_of(output_type)
        if model is not None:
            self._output_models.update(dict.fromkeys(agents, model))

    def _typed(self, agent: str, result: TurnResult) -> TurnResult:
        return typed(result, self._output_models.get(agent))

    def _output(
        self, agent: str, output_type: OutputTypeLike | None, retries: int, model: str | None
    ) -> OutputType | None:
        """The OutputType of a turn of `agent` (or of its children on `model`), checked for
        the provider it will run on."""
        if output_type is None:
            return None
        spec = self._spec(model)
        provider = spec.provider if spec else self.agent(agent).provider
        return make_output(output_type, retries, provider)  # type: ignore[arg-type]

    def _mcp_tools(self, names: Sequence[str]) -> list[dict[str, Any]]:
        """The schemas of the MCP tools `names` grants, listed from each server the first time
        this Grove needs it with that configuration (same command, arguments and environment,
        same tools), once however many roots ask at once; a server that cannot be started is a
        warning each time, and its tools are left out."""
        wanted = {name[len(MCP_PREFIX) :].split("__")[0] for name in names if is_mcp(name)}
        servers = mcp_servers(self.settings)
        unknown = sorted(wanted - set(servers))
        if unknown:
            raise CommandError(f"no MCP server named {', '.join(unknown)} is configured")
        if not wanted:
            return []
        configs = [servers[name] for name in sorted(wanted)]
        with self._mcp_lock:  # concurrent first uses: one lists, the others wait for it
            claimed: dict[McpServerConfig, Future[list[ListedTool]]] = {
                config: Future() for config in configs if config not in self._mcp_listings
            }
            self._mcp_listings.update(claimed)
            listings = [self._mcp_listings[config] for config in configs]
        if claimed:
            self._list_mcp_servers(claimed)
        return [
            {
                "name": tool.spec.name,
                "description": tool.spec.description,
                "parameters": tool.spec.parameters,
                "idempotent": tool.idempotent,
            }
            for listing in listings
            for tool in bridge.waited(listing)
        ]

    def _list_mcp_servers(self, claimed: dict[McpServerConfig, Future[list[ListedTool]]]) -> None:
        """List the servers of `claimed` and settle their futures; a server that could not be
        listed gets no tools and is forgotten (the next root tries it again), and an
        interrupted listing is raised to everyone waiting for it."""
        try:
            found = bridge.run(list_server_tools({config.name: config for config in claimed}))
        except BaseException as exc:
            self._forget_mcp_listings(list(claimed))
            for future in claimed.values():
                future.set_exception(exc)
            raise
        self._forget_mcp_listings([config for config in claimed if config.name not in found])
        for config, future in claimed.items():
            future.set_result(found.get(config.name, []))

    def _forget_mcp_listings(self, configs: list[McpServerConfig]) -> None:
        with self._mcp_lock:
            for config in configs:
                del self._mcp_listings[config]

    def _tool_policy(self, names: Sequence[str], allow: Sequence[str]) -> dict[str, str]:
        """Each tool's policy: `allow` first, then `[tools.policy]`, then the default."""
        configured = {**self.settings.tools.policy, **dict.fromkeys(allow, "allow")}
        return {name: policy_for(name, configured) for name in names}

    def send(
        self,
        agent: str,
        text: str,
        *,
        output_type: OutputTypeLike | None = None,
        output_retries: int = DEFAULT_OUTPUT_RETRIES,
    ) -> Turn:
        """Start a turn (CommandError for the rules: no model, dead agent, ...). With
        `output_type` its answer is typed (see `create_root`)."""
        output = self._output(agent, output_type, output_retries, None)
        ticket_id, uuid, host = self._begin_turn(agent, text, output)
        model = model_of(output_type) if output_type is not None else None
        return self._turn(ticket_id, uuid, host, model)

    def _begin_turn(self, agent: str, text: str, output: OutputType | None) -> Begun:
        """The supervisor's `begin_turn`. For an asyncio caller, the asks its loop makes at
        once share one `begin_turns` call (supervisor/core/coalesced_turns.py); one alone, or one
        whose agent is busy, goes as before."""
        if bridge.bridged():
            begun: Begun | Exception | None = bridge.awaited(
                self._loop_turns().starts.call((agent, text, output))
            )
            if isinstance(begun, Exception):
                raise begun
            if begun is not None:
                return begun
        alone: Begun = self._call("begin_turn", agent, text, output)
        return alone

    def _loop_turns(self) -> _LoopTurns:
        """The running loop's batching of turn beginnings and results (each loop has its
        own)."""
        loop = asyncio.get_running_loop()
        turns = self._loops.get(loop)
        if turns is None:
            starts = Coalescer(self._begin_turns, "grove-begin-turns")
            turns = self._loops[loop] = _LoopTurns(starts, TurnResults())
        return turns

    def _await_result(
        self, host: Any, ticket: str, timeout_s: float
    ) -> Awaitable[TurnResult | None]:
        return self._loop_turns().results.result(host, ticket, timeout_s)

    async def _begin_turns(self, requests: list[TurnRequest]) -> list[Any]:
        """Begin the requests' turns in one supervisor call; a lone one: None, for its
        caller to begin as it would have without company."""
        if len(requests) == 1:
            return [None]
        outcomes: list[Any] = await bridge.bridge(
            self._call, "begin_turns", requests, timeout_s=CALL_TIMEOUT_S * 5
        )
        return outcomes

    def _turn(
        self, ticket_id: str, agent: str, host: Any, model: type[BaseModel] | None = None
    ) -> Turn:
        approve = self._answer_approval if self._approvers else None
        return Turn(
            ticket_id,
            agent,
            host,
            self.supervisor,
            on_approval=approve,
            output_model=model or self._output_models.get(agent),
            results=self._result_wait,
        )

    def set_approver(self, session: str, approver: Approver | None) -> None:
        """Who answers "may this tool run?" for a session's "ask" tools: a function given
        the request that returns "y", "n" or "a" (always, for this session). Without one,
        such calls are refused with how to allow them."""
        if approver is None:
            self._approvers.pop(session, None)
        else:
            self._approvers[session] = approver
        self._call("attend_approvals", session, approver is not None)

    def _answer_approval(self, notice: str) -> None:
        request = ApprovalRequest(**json.loads(notice))
        approver = self._approvers.get(request.session)
        decision = approver(request) if approver is not None else "n"
        if inspect.isawaitable(decision):  # an AsyncGrove's approver may be a coroutine
            decision = bridge.run(decision)
        self.answer_approval(request.request, decision)

    def attend_approvals(self, session: str, on: bool) -> None:
        """For a program that answers approvals itself (the HTTP service's client): while
        `on`, the session's "ask" tools wait for an answer, and their requests come as
        ("approval", JSON) in the turn's stream instead of going to an approver here."""
        self._call("attend_approvals", session, on)

    def answer_approval(self, request_id: str, decision: str) -> str:
        """Answer an approval request: "y", "n" or "a" (always, for this session)."""
        text: str = self._call("answer_approval", request_id, decision)
        return text

    def command_turn(self, outcome: CommandOutcome) -> Turn | None:
        """The turn a command started (`/fork PROMPT` starts the child's), to stream it."""
        if "ticket" not in outcome.data:
            return None
        host = self._call("host", str(outcome.data["host"]))
        return self._turn(str(outcome.data["ticket"]), str(outcome.data["child"]), host)

    def fork_many(
        self,
        parent: str,
        prompts: list[str],
        model: str | None = None,
        *,
        system: str | None = None,
        advisor: str | None = None,
        keys: list[str] | None = None,
        budget: Budget | None = None,
        workspace: str | None = None,
        output_type: OutputTypeLike | None = None,
        output_retries: int = DEFAULT_OUTPUT_RETRIES,
    ) -> list[str]:
        """Fork one child of `parent` per prompt and start them all; their uuids, in order.
        `system` gives the children that system prompt instead of the parent's; `advisor`
        (MODEL[/THINKING]) attaches a reviewer to every child (a child's turn cut off by its
        host's death resumes on another, its result still stored once: as every turn does);
        `keys` (one per prompt) name the children so that a repeated call returns them;
        `budget` limits what the children and their descendants spend together (on top of
        the tree's budget); `workspace="worktree"` puts each child in a git worktree of its
        own (see `fork`), "shared" in the parent's directory (default: `[tools] workspace`);
        `output_type` makes the children's answers typed (see `create_root`): their results
        (`wait_any`, `answered`) carry `output`."""
        spec, reviewer = self._spec(model), self._spec(advisor)
        output = self._output(parent, output_type, output_retries, model)
        if keys is None:
            keys = [uuidlib.uuid4().hex for _ in prompts]  # makes the call safe to repeat
        children: list[str] = self._call(
            "fork_many",
            parent,
            prompts,
            spec,
            system,
            reviewer,
            keys,
            budget,
            workspace,
            output,
            timeout_s=600,
        )
        self._remember_model(children, output_type)
        return children

    def fork(
        self,
        parent: str,
        prompt: str | None = None,
        model: str | None = None,
        *,
        tools: list[str] | None = None,
        workspace: str | None = None,
    ) -> str:
        """Fork one child of `parent` (its conversation so far, its tools or the named few of
        them) and, given a prompt, start its first turn; the child's uuid. Its answer:
        `wait_turn(child)`. `workspace="worktree"`: the child works in a git worktree of the
        parent's repository on branch `grove/<uuid8>`, made from the parent's HEAD with what
        it has not committed; each of its turns ends with a commit there, and its result's
        `worktree` names the branch and the diff stat. "shared": the parent's directory."""
        child: AgentRecord = self._call(
            "fork", parent, prompt, self._spec(model), tools, workspace, timeout_s=600
        )
        return child.uuid

    def worktrees(self, prune: bool = False, repository: str | None = None) -> list[WorktreeRow]:
        """Grove's worktrees of the repository at `repository` (default: the working
        directory), with their agents, branches and diff stats. `prune`: remove those of
        ended agents and those merged into HEAD (uncommitted work is committed to the branch
        first; an unmerged branch is kept)."""
        store = open_store(self.settings.store)
        try:
            return bridge.run(worktree_rows(store, repository or str(Path.cwd()), prune))
        finally:
            store.close()

    def models(self, include_retired: bool = False, provider: str | None = None) -> list[Any]:
        """The catalog: each model (`provider`'s only, when given; retired ones with
        `include_retired`) with its standing today, windows and prices (`grove models`).
        Needs no start."""
        return model_rows(include_retired, provider)

    def _spec(self, text: str | None, setting: str = "") -> ModelSpec | None:
        """The model `text` names (None for none), or CommandError with its one line after
        `setting` (the config key it came from, where it came from one)."""
        try:
            return chosen_model(text, self.settings.models.aliases) if text else None
        except ModelSpecError as exc:
            raise CommandError(f"{setting}{exc}") from exc

    def release_caches(self, agent: str | None = None) -> int:
        """Delete the provider-side cache entries (Gemini `cachedContents`) made for the
        children of `agent` (of every agent: None); how many. A batch does this at its end;
        closing a Grove that started Ray does it for all."""
        released: int = self._call("release_caches", agent)
        return released

    def seed(self, agent: str, entries: list[tuple[str, str]]) -> list[MessageRecord]:
        """Append `(kind, content)` user and assistant messages to `agent`'s history in one
        store call, running no turn: a shared context for the children it will fork."""
        stored: list[MessageRecord] = self._call("seed", agent, entries, timeout_s=600)
        return stored

    def answered(self, keys: list[str]) -> dict[str, tuple[str, TurnResult]]:
        """Children forked under any of `keys` that have a stored answer: key -> (agent,
        result). What an interrupted batch already finished, found again on its rerun."""
        found: dict[str, tuple[str, TurnResult]] = self._call("answered", keys, timeout_s=600)
        return {key: (agent, self._typed(agent, result)) for key, (agent, result) in found.items()}

    def run_batch(
        self,
        root: str,
        tasks: list[Task],
        *,
        concurrency: int = DEFAULT_CONCURRENCY,
        advisor: str | None = None,
        key: str = "",
        workspace: str | None = None,
        stop: threading.Event | None = None,
        output_type: OutputTypeLike | None = None,
        output_retries: int = DEFAULT_OUTPUT_RETRIES,
    ) -> Iterator[Step]:
        """Run `tasks` as forked children of `root`, at most `concurrency` at once (`advisor`:
        a reviewer on each); each finished task's record as it comes, or None when a second
        passed without one. `key` names the batch: a rerun under it takes the answers an
        interrupted run left instead of running those tasks again. `workspace`: as fork_many's.
        `output_type` types the answers of the tasks without a schema of their own (records
        carry `output`; `invalid_output` for an answer still malformed after `output_retries`).
        `stop` ends the run early, cancelling the tasks in flight (supervisor/batch/ holds the
        stages around this one)."""
        runner = BatchRunner(
            self,
            concurrency,
            advisor=advisor,
            key=key,
            workspace=workspace,
            stop=stop,
            output_type=output_type,
            output_retries=output_retries,
        )
        return runner.run(root, tasks)

    def set_todo(self, session: str, markdown: str) -> str:
        """Replace the session's focused agent's todo list with `markdown` (the `/todo` form:
        `# Phase`, `- [ ]`, `- [/]` or `- [>]`, `- [x]`, `- [-]` or `- [~]`); the new list."""
        text: str = self._call("set_todo", session, markdown)
        return text

    def advice(self, agent: str) -> list[MessageRecord]:
        """The advisor cards delivered to `agent`, oldest first."""
        cards: list[MessageRecord] = self._call("advice", agent)
        return cards

    def wait_reviews(self, agent: str, timeout_s: float = 60.0) -> int:
        """Wait until `agent`'s reviewers have nothing queued; the backlog left at timeout."""
        left: int = self._call("wait_reviews", agent, timeout_s, timeout_s=timeout_s + 30)
        return left

    def wait_any(self, agents: list[str], timeout_s: float) -> dict[str, TurnResult | None]:
        """Results of those of `agents` that are done, once at least one is ({} on timeout)."""
        done: dict[str, TurnResult | None] = self._call(
            "wait_any", agents, timeout_s, timeout_s=timeout_s + CALL_TIMEOUT_S
        )
        return {
            agent: None if result is None else self._typed(agent, result)
            for agent, result in done.items()
        }

    def route_mail(self, mails: list[tuple[str, str, str]]) -> list[int]:
        """Deliver many `(sender, recipient, text)` mails with one supervisor call, one store
        transaction and one `MailRouted` event; each reaches its recipient as `/send` would.
        CommandError, nothing stored, when a recipient is unknown or has ended."""
        ids: list[int] = self._call("route_mail", mails, timeout_s=CALL_TIMEOUT_S * 5)
        return ids

    def ask(
        self,
        agent: str,
        text: str,
        timeout_s: float = 3600.0,
        *,
        output_type: OutputTypeLike | None = None,
        output_retries: int = DEFAULT_OUTPUT_RETRIES,
    ) -> TurnResult:
        """Send `text` and wait for the turn's result; `output_type` makes the answer typed:
        `result.output` is an instance of the model (a dict for a schema dict)."""
        turn = self.send(agent, text, output_type=output_type, output_retries=output_retries)
        return turn.result(timeout_s)

    def dispatch(self, session: str, line: str, origin: str = "api") -> CommandOutcome:
        outcome: CommandOutcome = self._call("dispatch", session, line, origin, timeout_s=3600)
        return outcome

    def focus(self, session: str) -> str:
        focus: str = self._call("focus", session)
        return focus

    def agent(self, prefix: str) -> AgentRecord:
        record: AgentRecord = self._call("agent", prefix)
        return record

    def history(self, agent: str) -> list[MessageRecord]:
        messages: list[MessageRecord] = self._call("conversation", agent)
        return messages

    def streaming(self, agent: str) -> bool:
        streaming: bool = self._call("streaming", agent)
        return streaming

    def turns_in_flight(self) -> int:
        """How many agents have a turn in flight now (a service's idle stop waits for none)."""
        count: int = self._call("turns_in_flight")
        return count

    def watch(self, agent: str) -> Iterator[tuple[str, str]]:
        """The `(kind, text)` deltas of the agent's turn in progress, those so far first, to
        its end (nothing when it has none): for a reader that did not start the turn."""
        wait = RESUME_WAIT_S  # a turn between hosts is followed once it has resumed
        running = self._call("turn_host", agent, wait, timeout_s=wait + CALL_TIMEOUT_S)
        if running is not None:
            host, ticket = running
            stream = host.watch.options(num_returns="streaming").remote(agent, ticket)
            yield from streamed(self.supervisor, agent, ticket, stream)

    def cancel(self, agent: str) -> bool:
        cancelled: bool = self._call("cancel", agent)
        return cancelled

    def wait_turn(self, agent: str, timeout_s: float = 3600.0) -> TurnResult | None:
        result: TurnResult | None = self._call(
            "wait_turn", agent, timeout_s, timeout_s=timeout_s + CALL_TIMEOUT_S
        )
        return None if result is None else self._typed(agent, result)

    def host_pids(self) -> dict[str, int]:
        """The process id of each live agent host, by host id."""
        pids: dict[str, int] = self._call("host_pids")
        return pids

    def provider_identity(self, agent: str) -> dict[str, Any]:
        identity: dict[str, Any] = self._call("provider_identity", agent)
        return identity
