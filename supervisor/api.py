"""`Grove`: the Python API for programs and for Grove's own CLI.

Starts or joins Ray, finds or starts the supervisor, and streams turns straight from hosts.
"""

from __future__ import annotations

import atexit
import inspect
import json
import os
import secrets
import threading
import uuid as uuidlib
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import ExitStack, suppress
from pathlib import Path
from typing import Any, Self, Unpack

import ray
from pydantic import BaseModel

from grove.actors.output import OutputType
from grove.actors.telemetry import caller_traceparent
from grove.actors.turn_result import TurnResult
from grove.providers.base import DEFAULT_OUTPUT_RETRIES
from grove.providers.errors import GroveError
from grove.providers.http import Endpoint
from grove.providers.model_specs import ModelSpec
from grove.providers.tier_rules import checked_tier
from grove.supervisor import bridge
from grove.supervisor.actor import NAMESPACE
from grove.supervisor.agent_tiers import TIER_KEY, say_children_tier, say_replaced
from grove.supervisor.api_turn import RESUME_WAIT_S, ResultWait, Turn, streamed, watched
from grove.supervisor.approvals import ApprovalRequest
from grove.supervisor.batch.defaults import DEFAULT_CONCURRENCY
from grove.supervisor.batch.runner import BatchRunner, Step
from grove.supervisor.batch.tasks import Task
from grove.supervisor.budget_rules import Budget
from grove.supervisor.commands.registry import CommandOutcome
from grove.supervisor.config import GroveSettings, load_settings
from grove.supervisor.deployment import model_spec, supervisor_settings
from grove.supervisor.fork_options import ForkOptions
from grove.supervisor.local_ray import LocalRay, start_ray
from grove.supervisor.mcp_listings import McpListings
from grove.supervisor.model_table import model_rows
from grove.supervisor.output_models import OutputModels
from grove.supervisor.output_types import OutputTypeLike, model_of
from grove.supervisor.output_types import output_type as make_output
from grove.supervisor.store import open_store
from grove.supervisor.store.records import AgentRecord
from grove.supervisor.supervisor_calls import SupervisorCalls
from grove.supervisor.supervisor_link import CALL_TIMEOUT_S, SupervisorLink, join_or_make_supervisor
from grove.supervisor.telemetry import telemetry_settings
from grove.supervisor.toolbox import ToolsGiven, root_tool_entries
from grove.supervisor.trace_printer import printing_spans
from grove.supervisor.turn_starts import TurnStarts
from grove.supervisor.worktrees import WorktreeRow, worktree_rows

Approver = Callable[[ApprovalRequest], str | Awaitable[str]]


class Grove(SupervisorCalls):
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
        self._outputs = OutputModels()
        self._mcp = McpListings()
        self.supervisor: Any = None  # the Supervisor actor's handle, once started
        self._link: SupervisorLink | None = None
        self.turn_starts = TurnStarts(self._link_started)
        self._result_wait: ResultWait = self.turn_starts.result_wait  # one for all its turns
        self.traced = False  # spans are exported (`[telemetry]`, OTEL_*: supervisor/telemetry.py)

    def __enter__(self) -> Self:
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
        settings = supervisor_settings(self.settings, self.hosts, simulator, telemetry)
        self.supervisor, self._made_supervisor = join_or_make_supervisor(settings)
        self._link = SupervisorLink(self.supervisor)
        self._answer(self._service.ready(), CALL_TIMEOUT_S * 2)
        self.traced = telemetry is not None
        if self.traced:
            atexit.register(self.flush_telemetry)  # a program that never closes its Grove

    def _start_simulator(self) -> Endpoint:
        from grove.simulator import SimulatorConfig, SimulatorThread

        key = "sim-" + secrets.token_hex(16)
        simulator = self._stack.enter_context(SimulatorThread(SimulatorConfig(port=0, api_key=key)))
        return Endpoint(base_url=simulator.base_url, api_key=key)

    def flush_telemetry(self) -> None:
        """Export the spans the supervisor and every host have ended (closing does it)."""
        if self.traced and self.supervisor is not None:
            with suppress(GroveError, ray.exceptions.RayError, TimeoutError):
                self._answer(self._service.flush_telemetry())

    def close(self) -> None:
        if self.traced:
            self.flush_telemetry()
            atexit.unregister(self.flush_telemetry)
            self.traced = False
        if self.supervisor is not None and (self._started_ray or self._made_supervisor):
            with suppress(GroveError, ray.exceptions.RayError):
                self.release_caches()  # a provider-side entry must not outlive its Grove
            with suppress(GroveError, ray.exceptions.RayError):
                self._answer(self._service.let_go(), 10.0)  # its trees show `stopped` at once
            ray.kill(self.supervisor)  # its hosts are its own actors: they go with it
            self.supervisor = None
            self._link = None
            self._made_supervisor = False
        if self._started_ray:
            ray.shutdown()
            self._started_ray = False
        if self._local_ray is not None:
            self._local_ray.stop()
            self._local_ray = None
        self._stack.close()

    def create_root(
        self,
        model: str | None = None,
        *,
        system: str | None = None,
        isolation: str | None = None,
        tools: ToolsGiven = None,
        allow: Sequence[str] = (),
        approver: Approver | None = None,
        budget: Budget | None = None,
        output_type: OutputTypeLike | None = None,
        output_retries: int = DEFAULT_OUTPUT_RETRIES,
        tier: str | None = None,
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
        times. `tier`: the price tier of its requests and, unless they name their own, its
        children's (providers/tier_rules.py TIER_HELP; default: `[defaults] tier`)."""
        spec = self._spec(model or self.settings.defaults.model)
        asked = checked_tier(tier or self.settings.defaults.tier)
        entries = root_tool_entries(tools, allow, self.settings, self._mcp)
        limits = budget.as_dict() if budget is not None else self.settings.budget.budget()
        if limits is not None:
            entries["budget"] = limits
        entries[TIER_KEY] = asked
        if output_type is not None:
            provider = spec.provider if spec else None
            entries["output"] = make_output(output_type, output_retries, provider).to_data()
        trace_parent = caller_traceparent() if self.traced else None
        record = self._answer(
            self._service.create_root(spec, system, isolation, entries, trace_parent)
        )
        self._outputs.remember([record.uuid], output_type)
        say_replaced(record.provider, record.model, asked)
        if approver is not None:
            self.set_approver(record.uuid, approver)
        return record

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
        ticket_id, uuid, host = self.turn_starts.begin(agent, text, output)
        model = model_of(output_type) if output_type is not None else None
        return self._turn(ticket_id, uuid, host, model)

    def _turn(
        self, ticket_id: str, agent: str, host: Any, model: type[BaseModel] | None = None
    ) -> Turn:
        approve = self._answer_approval if self._approvers else None
        return Turn(
            ticket_id,
            agent,
            host,
            self._link_started(),
            on_approval=approve,
            output_model=model or self._outputs.of(agent),
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
        self._answer(self._service.attend_approvals(session, approver is not None))

    def _answer_approval(self, notice: str) -> None:
        request = ApprovalRequest(**json.loads(notice))
        approver = self._approvers.get(request.session)
        decision = approver(request) if approver is not None else "n"
        if inspect.isawaitable(decision):  # an AsyncGrove's approver may be a coroutine
            decision = bridge.run(decision)
        self.answer_approval(request.request, decision)

    def command_turn(self, outcome: CommandOutcome) -> Turn | None:
        """The turn a command started (`/fork PROMPT` starts the child's), to stream it."""
        if "ticket" not in outcome.data:
            return None
        host = self._answer(self._service.host(str(outcome.data["host"])))
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
        output_type: OutputTypeLike | None = None,
        output_retries: int = DEFAULT_OUTPUT_RETRIES,
        **options: Unpack[ForkOptions],
    ) -> list[str]:
        """Fork one child of `parent` per prompt and start them all; their uuids, in order.
        `system` gives the children that system prompt instead of the parent's; `advisor`
        (MODEL[/THINKING]) attaches a reviewer to every child (a child's turn cut off by its
        host's death resumes on another, its result still stored once: as every turn does);
        `keys` (one per prompt) name the children so that a repeated call returns them;
        `budget` limits what the children and their descendants spend together (on top of
        the tree's budget); `output_type` makes the children's answers typed (see
        `create_root`): their results (`wait_any`, `answered`) carry `output`. `options`
        (supervisor/contract.py ForkOptions: `workspace`, `tools`) go to every child alike."""
        spec, reviewer = self._spec(model), self._spec(advisor)
        output = self._output(parent, output_type, output_retries, model)
        if keys is None:
            keys = [uuidlib.uuid4().hex for _ in prompts]  # makes the call safe to repeat
        children = self._answer(
            self._service.fork_many(
                parent, prompts, spec, system, reviewer, keys, budget, output, options
            ),
            600,
        )
        self._outputs.remember(children, output_type)
        say_children_tier(self, children, options.get("tier"))
        return children

    def fork(
        self,
        parent: str,
        prompt: str | None = None,
        model: str | None = None,
        *,
        tools: list[str] | None = None,
        workspace: str | None = None,
        tier: str | None = None,
    ) -> str:
        """Fork one child of `parent` (its conversation so far, its tools or the named few of
        them) and, given a prompt, start its first turn; the child's uuid. Its answer:
        `wait_turn(child)`. `workspace="worktree"`: the child works in a git worktree of the
        parent's repository on branch `grove/<uuid8>`, made from the parent's HEAD with what
        it has not committed; each of its turns ends with a commit there, and its result's
        `worktree` names the branch and the diff stat. "shared": the parent's directory.
        `tier`: its price tier (default: the parent's)."""
        spec = self._spec(model)
        child = self._answer(self._service.fork(parent, prompt, spec, tools, workspace, tier), 600)
        say_replaced(child.provider, child.model, tier)
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
        """The model `text` names (None for none); CommandError in one line."""
        return model_spec(self.settings, text, setting)

    def run_batch(
        self,
        root: str,
        tasks: list[Task],
        *,
        concurrency: int = DEFAULT_CONCURRENCY,
        advisor: str | None = None,
        key: str = "",
        stop: threading.Event | None = None,
        output_type: OutputTypeLike | None = None,
        output_retries: int = DEFAULT_OUTPUT_RETRIES,
        **options: Unpack[ForkOptions],
    ) -> Iterator[Step]:
        """Run `tasks` as forked children of `root`, at most `concurrency` at once (`advisor`:
        a reviewer on each); each finished task's record as it comes, or None when a second
        passed without one. `key` names the batch: a rerun under it takes the answers an
        interrupted run left instead of running those tasks again. `options`: as fork_many's.
        `output_type` types the answers of the tasks without a schema of their own (records
        carry `output`; `invalid_output` for an answer still malformed after `output_retries`).
        `stop` ends the run early, cancelling the tasks in flight (supervisor/batch/ holds the
        stages around this one)."""
        runner = BatchRunner(
            self,
            concurrency,
            advisor=advisor,
            key=key,
            stop=stop,
            output_type=output_type,
            output_retries=output_retries,
            options=options,
        )
        return runner.run(root, tasks)

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

    def watch(self, agent: str) -> Iterator[tuple[str, str]]:
        """The `(kind, text)` deltas of the agent's turn in progress, those so far first, to
        its end (nothing when it has none): for a reader that did not start the turn."""
        wait = RESUME_WAIT_S  # a turn between hosts is followed once it has resumed
        running = self._answer(self._service.turn_host(agent, wait), wait + CALL_TIMEOUT_S)
        if running is not None:
            host, ticket = running
            yield from streamed(self._link_started(), agent, ticket, watched(host, agent, ticket))
