"""The surfaces of supervisor/ that cross a boundary, declared once as Protocols: `GroveAPI`
(what `Grove`, the service's `RemoteGrove` and, awaited, `AsyncGrove` offer the command line
and programs), `ReadsAPI` (the store's reads, local or served) and `SupervisorService` (what
a Grove asks of the `Supervisor` Ray actor).

mypy checks each implementation against them; the Ray actor is called only through
`RayProxy[SupervisorService]`, never by a method name in a string. The HTTP side imports this
for its types only (it loads Ray): a command through the service starts fast.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol, Self, Unpack

from grove.actors.ray_proxy import repeatable
from grove.providers.base import DEFAULT_OUTPUT_RETRIES
from grove.supervisor.batch.defaults import DEFAULT_CONCURRENCY
from grove.supervisor.fork_options import ForkOptions

if TYPE_CHECKING:
    import threading

    from grove.actors.output import OutputType
    from grove.actors.turn_result import TurnResult
    from grove.providers.model_specs import ModelSpec
    from grove.supervisor.approvals import ApprovalRequest
    from grove.supervisor.batch.runner import Step
    from grove.supervisor.batch.tasks import Task
    from grove.supervisor.budget_rules import Budget
    from grove.supervisor.commands.registry import CommandOutcome
    from grove.supervisor.store.records import AgentRecord, MessageRecord
    from grove.supervisor.turns import Begun

# Who answers "may this tool run?" for a session: given the request, "y", "n" or "a".
Approver = Callable[["ApprovalRequest"], str]
# An answer's shape as a JSON schema (its root an object): the form every Grove takes.
OutputSchema = dict[str, Any]


class AgentView(Protocol):
    """What a Grove's answer about an agent holds, whichever side gave it."""

    @property
    def uuid(self) -> str: ...
    @property
    def name(self) -> str | None: ...
    @property
    def parent_uuid(self) -> str | None: ...
    @property
    def provider(self) -> str | None: ...
    @property
    def model(self) -> str | None: ...
    @property
    def thinking_level(self) -> str | None: ...
    @property
    def metadata(self) -> dict[str, Any]: ...


class MessageView(Protocol):
    """A message stored in an agent's history."""

    @property
    def id(self) -> int: ...
    @property
    def kind(self) -> str: ...
    @property
    def content(self) -> str: ...


class TurnAPI(Protocol):
    """A turn in progress: iterate for its `(kind, text)` deltas; `result` waits for its end
    (TurnTimeout when it has not ended within `timeout_s`: it goes on)."""

    @property
    def agent(self) -> str: ...
    def __iter__(self) -> Iterator[tuple[str, str]]: ...
    def result(self, timeout_s: float = 3600.0) -> TurnResult: ...


class GroveAPI(Protocol):
    """The Grove interface: what a command runs on, local (`Grove`) or served (`RemoteGrove`).
    `AsyncGrove` offers the same methods as coroutines (a turn as an `AsyncTurn`)."""

    def __enter__(self) -> Self: ...
    def __exit__(self, *exc: object) -> None: ...
    def start(self) -> None: ...
    def close(self) -> None: ...
    def models(self, include_retired: bool = False, provider: str | None = None) -> list[Any]: ...
    def create_root(
        self,
        model: str | None = None,
        *,
        system: str | None = None,
        isolation: str | None = None,
        tools: Sequence[str] | None = None,
        allow: Sequence[str] = (),
        approver: Approver | None = None,
        budget: Budget | None = None,
        output_type: OutputSchema | None = None,
        output_retries: int = DEFAULT_OUTPUT_RETRIES,
        tier: str | None = None,
    ) -> AgentView: ...
    def agent(self, prefix: str) -> AgentView: ...
    def seed(self, agent: str, entries: list[tuple[str, str]]) -> Sequence[MessageView]: ...
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
        output_type: OutputSchema | None = None,
        output_retries: int = DEFAULT_OUTPUT_RETRIES,
        **options: Unpack[ForkOptions],
    ) -> list[str]: ...
    def send(
        self,
        agent: str,
        text: str,
        *,
        output_type: OutputSchema | None = None,
        output_retries: int = DEFAULT_OUTPUT_RETRIES,
    ) -> TurnAPI: ...
    def ask(
        self,
        agent: str,
        text: str,
        timeout_s: float = 3600.0,
        *,
        output_type: OutputSchema | None = None,
        output_retries: int = DEFAULT_OUTPUT_RETRIES,
    ) -> TurnResult: ...
    def dispatch(self, session: str, line: str, origin: str = "api") -> CommandOutcome: ...
    def command_turn(self, outcome: CommandOutcome) -> TurnAPI | None: ...
    def focus(self, session: str) -> str: ...
    def cancel(self, agent: str) -> bool: ...
    def wait_turn(self, agent: str, timeout_s: float = 3600.0) -> TurnResult | None: ...
    def set_todo(self, session: str, markdown: str) -> str: ...
    def set_approver(self, session: str, approver: Approver | None) -> None: ...
    def attend_approvals(self, session: str, on: bool) -> None: ...
    def answer_approval(self, request_id: str, decision: str) -> str: ...
    def advice(self, agent: str) -> Sequence[MessageView]: ...
    def watch(self, agent: str) -> Iterator[tuple[str, str]]: ...
    def run_batch(
        self,
        root: str,
        tasks: list[Task],
        *,
        concurrency: int = DEFAULT_CONCURRENCY,
        advisor: str | None = None,
        key: str = "",
        stop: threading.Event | None = None,
        output_type: OutputSchema | None = None,
        output_retries: int = DEFAULT_OUTPUT_RETRIES,
        **options: Unpack[ForkOptions],
    ) -> Iterator[Step]: ...


class ReadsAPI(Protocol):
    """What `grove agents`, `history`, `events`, `usage` and `worktrees` read: the store itself
    (`StoreReads`) or a running service (`RemoteReads`), in one JSON shape."""

    def close(self) -> None: ...
    def agents(self, include_ended: bool) -> dict[str, Any]: ...
    def history(self, agent: str) -> dict[str, Any]: ...
    def events(self, after: int = 0, limit: int = 1000) -> list[dict[str, Any]]: ...
    def follow_events(self, after: int, wait_s: float) -> Iterator[list[dict[str, Any]]]: ...
    def usage(self, agent: str | None, by: str) -> dict[str, Any]: ...
    def trim_events(self) -> dict[str, Any]: ...
    def worktrees(self, repository: str, prune: bool = False) -> list[dict[str, Any]]: ...


class SupervisorService(Protocol):
    """What a Grove asks of the `Supervisor` Ray actor (supervisor/actor.py), its methods'
    signatures as the actor has them. `@repeatable`: a call that changes nothing, or is
    idempotent (fork_many with keys), repeated after a supervisor restart instead of failing."""

    @repeatable
    async def ready(self) -> dict[str, Any]: ...
    async def let_go(self) -> None: ...
    def host(self, host_id: str) -> Any: ...
    async def flush_telemetry(self) -> None: ...
    @repeatable
    async def host_pids(self) -> dict[str, int]: ...
    async def create_root(
        self,
        spec: ModelSpec | None,
        system: str | None,
        isolation: str | None,
        tools: dict[str, Any] | None = None,
        trace_parent: str | None = None,
    ) -> AgentRecord: ...
    @repeatable
    async def wait_reviews(self, agent: str, timeout_s: float) -> int: ...
    async def set_todo(self, session: str, markdown: str) -> str: ...
    @repeatable
    async def advice(self, agent: str) -> list[MessageRecord]: ...
    async def attend_approvals(self, session: str, on: bool) -> None: ...
    async def answer_approval(self, request_id: str, decision: str) -> str: ...
    async def begin_turn(
        self, uuid: str, text: str | None, output: OutputType | None = None
    ) -> Begun: ...
    async def begin_turns(
        self, requests: list[tuple[str, str, OutputType | None]]
    ) -> list[Begun | Exception | None]: ...
    @repeatable
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
    ) -> list[str]: ...
    async def release_caches(self, agent: str | None) -> int: ...
    async def fork(
        self,
        parent: str,
        prompt: str | None,
        model: ModelSpec | None,
        tools: list[str] | None,
        workspace: str | None,
        tier: str | None = None,
    ) -> AgentRecord: ...
    async def answered(self, keys: list[str]) -> dict[str, tuple[str, TurnResult]]: ...
    async def seed(self, uuid: str, entries: list[tuple[str, str]]) -> list[MessageRecord]: ...
    @repeatable
    async def wait_any(
        self, uuids: list[str], timeout_s: float
    ) -> dict[str, TurnResult | None]: ...
    @repeatable
    async def wait_turn(self, uuid: str, timeout_s: float) -> TurnResult | None: ...
    async def cancel(self, uuid: str) -> bool: ...
    async def route_mail(self, batch: list[tuple[str, str, str]]) -> list[int]: ...
    async def dispatch(self, session: str, line: str, origin: str) -> CommandOutcome: ...
    @repeatable
    async def focus(self, session: str) -> str: ...
    @repeatable
    async def agent(self, prefix: str) -> AgentRecord: ...
    @repeatable
    async def conversation(self, uuid: str) -> list[MessageRecord]: ...
    @repeatable
    async def streaming(self, uuid: str) -> bool: ...
    @repeatable
    async def turns_in_flight(self) -> int: ...
    async def turn_host(self, uuid: str, timeout_s: float) -> Any: ...
    async def resumed_host(self, uuid: str, dead: str, timeout_s: float) -> Any: ...
    @repeatable
    async def provider_identity(self, uuid: str) -> dict[str, Any]: ...
