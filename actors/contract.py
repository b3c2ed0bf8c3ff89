"""The two surfaces a host shares with the supervisor across Ray: `HostAPI`, what a host offers,
and `SupervisorAPI`, what hosts may ask of the supervisor; with the timeout of each call.

Declared once here, called through `RayProxy[...]` (actors/ray_proxy.py) on either side and
implemented by `AgentHostCore` and the `Supervisor` actor; mypy checks both ends against it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Protocol

from grove.actors.advisor_messages import ReviewerSpec, ReviewReport
from grove.actors.agent.batched import BatchAnswer
from grove.actors.agent.choice import ModelChoice
from grove.actors.host.tickets import Activation, Ticket
from grove.actors.ray_proxy import repeatable, streamed, timeout
from grove.actors.turn_result import NewEntry, TurnResult
from grove.providers.base import AssistantTurn, ProviderName, Request, Tier
from grove.providers.google.cache import CachedContent
from grove.providers.stream_events import RateLimitLeft

# A host's calls that hold nothing long (the proxy's default for HostAPI).
HOST_CALL_TIMEOUT_S = 30.0
HOST_PING_TIMEOUT_S = 10.0
TELEMETRY_FLUSH_TIMEOUT_S = 30.0
ONE_REQUEST_TIMEOUT_S = 900.0  # a summary of a long history may stream for minutes
# Hosts' calls upward: their turns' reports and steps, and the tools and checks they ask for.
REPORT_TIMEOUT_S = 30.0
TOOL_CALL_TIMEOUT_S = 60.0
# How long a call waits for a person to answer "may this tool run?" before it is refused.
APPROVAL_TIMEOUT_S = 600.0

# One delta run of a turn's stream: (kind, text), kind such as "text", "thinking", "notice".
Chunk = list[tuple[str, str]]


class HostAPI(Protocol):
    """What a host (`AgentHost`) offers the supervisor and Grove's callers. `prefix` arguments
    are a list of entries or a Ray object reference to one (Ray resolves it on the host)."""

    @timeout(HOST_CALL_TIMEOUT_S)
    async def prepare(
        self, uuid: str, choice: ModelChoice, activation: Activation | None = None
    ) -> None: ...

    @timeout(HOST_CALL_TIMEOUT_S)
    async def start_turn(self, ticket: Ticket, activation: Activation | None = None) -> None: ...

    @timeout(HOST_CALL_TIMEOUT_S)
    async def prepare_many(
        self, items: list[tuple[str, ModelChoice, Activation | None]], prefix: Any
    ) -> list[Exception | None]: ...

    @timeout(HOST_CALL_TIMEOUT_S)
    async def start_turns(self, tickets: list[Ticket]) -> list[Exception | None]: ...

    @timeout(HOST_CALL_TIMEOUT_S)
    async def start_many(
        self,
        items: list[tuple[Ticket, Activation]],
        prefix: Any,
        cached_content: str | None = None,
    ) -> None: ...

    # Waits up to `timeout_s` itself: its caller gives the call `timeout_s` more than that.
    @timeout(HOST_CALL_TIMEOUT_S)
    async def wait_started(self, ticket_id: str, timeout_s: float) -> bool: ...

    @timeout(ONE_REQUEST_TIMEOUT_S)
    async def create_cache(
        self, activation: Activation, prefix: Any, ttl_s: int
    ) -> CachedContent: ...

    @timeout(HOST_CALL_TIMEOUT_S)
    async def drop_cache(self, choice: ModelChoice, name: str) -> None: ...

    @streamed
    def stream(self, ticket_id: str) -> AsyncIterator[Chunk]: ...

    @streamed
    def watch(self, uuid: str, ticket_id: str | None = None) -> AsyncIterator[Chunk]: ...

    # As long as the turn takes: its caller gives the call its own timeout.
    @timeout(None)
    async def result(self, ticket_id: str) -> TurnResult: ...

    @timeout(None)  # returns within `timeout_s` of its own, or when a turn ends
    async def results(
        self, ticket_ids: list[str], timeout_s: float
    ) -> dict[str, TurnResult | None]: ...

    @timeout(HOST_CALL_TIMEOUT_S)
    async def cancel(self, uuid: str) -> bool: ...

    @timeout(HOST_CALL_TIMEOUT_S)
    async def announce(self, uuid: str, kind: str, text: str) -> bool: ...

    @timeout(HOST_CALL_TIMEOUT_S)
    async def switch_model(self, uuid: str, choice: ModelChoice) -> None: ...

    @timeout(HOST_CALL_TIMEOUT_S)
    async def steer(self, uuid: str, entry: NewEntry) -> bool: ...

    @timeout(HOST_CALL_TIMEOUT_S)
    async def steer_many(self, entries: list[tuple[str, NewEntry]]) -> int: ...

    @timeout(HOST_CALL_TIMEOUT_S)
    async def drop(self, uuid: str) -> None: ...

    @timeout(HOST_CALL_TIMEOUT_S)
    async def add_reviewer(self, spec: ReviewerSpec) -> None: ...

    @timeout(HOST_CALL_TIMEOUT_S)
    async def review(self, uuid: str, delta: str) -> tuple[int, int]: ...

    @timeout(HOST_CALL_TIMEOUT_S)
    async def reset_reviewer(self, uuid: str, primer: str) -> tuple[int, int]: ...

    @timeout(HOST_CALL_TIMEOUT_S)
    async def drop_reviewer(self, uuid: str) -> None: ...

    @timeout(HOST_CALL_TIMEOUT_S)
    async def reviewer_view(self, uuid: str, what: str) -> Any:
        """`status` (a dict), `dump` or `dump raw` (text)."""
        ...

    @timeout(ONE_REQUEST_TIMEOUT_S)
    async def complete(
        self, choice: ModelChoice, system: str, prompt: str, max_tokens: int
    ) -> AssistantTurn: ...

    @repeatable
    @timeout(HOST_PING_TIMEOUT_S)
    async def ping(self) -> dict[str, Any]:
        """The host's id, process id and how many agents it holds."""
        ...

    @timeout(TELEMETRY_FLUSH_TIMEOUT_S)
    async def flush_telemetry(self) -> None:
        """Export the spans this host has ended (before Grove stops it)."""
        ...

    @repeatable
    @timeout(HOST_CALL_TIMEOUT_S)
    async def provider_identity(self, uuid: str) -> dict[str, Any]:
        """For tests and diagnostics: the host's process and the provider an agent holds."""
        ...


class SupervisorAPI(Protocol):
    """What a host may ask of the supervisor. A budget's hold is the supervisor's record
    (supervisor/budget.py); a compacted conversation, its message records."""

    @timeout(None)  # answers at once: 0.0, or the seconds to wait before asking again
    async def fleet_acquire_many(self, requests: list[tuple[str, int]]) -> list[float]: ...

    @timeout(TOOL_CALL_TIMEOUT_S)
    async def fleet_release_many(
        self, ended: list[tuple[str, RateLimitLeft | None]]
    ) -> list[None]: ...

    @timeout(None)
    async def fleet_cool_down(self, uuid: str, provider: str, seconds: float) -> None: ...

    @timeout(TOOL_CALL_TIMEOUT_S)
    async def billed_many(self, requests: list[tuple[str, str, dict[str, Any]]]) -> list[None]: ...

    @timeout(TOOL_CALL_TIMEOUT_S)
    async def budget_reserve_many(
        self, requests: list[tuple[str, str, int, int | None, Tier]]
    ) -> list[tuple[str, Any]]: ...

    @timeout(TOOL_CALL_TIMEOUT_S)
    async def budget_extend(
        self, uuid: str, model: str, hold: Any, more: int
    ) -> tuple[bool, str | None, Any]: ...

    @timeout(TOOL_CALL_TIMEOUT_S)
    async def budget_settle_many(self, ended: list[tuple[str, Any, int, float]]) -> list[None]: ...

    @timeout(REPORT_TIMEOUT_S)
    async def store_steps(self, steps: list[tuple[Ticket, int, NewEntry]]) -> list[int | None]: ...

    @timeout(REPORT_TIMEOUT_S)
    async def complete_turns(self, finished: list[tuple[Ticket, TurnResult]]) -> list[str]: ...

    # A `wait` call is given the time it asks for besides (actors/ sets it per call).
    @timeout(TOOL_CALL_TIMEOUT_S)
    async def tool_call(
        self, agent: str, tool: str, arguments: dict[str, Any], trace: str | None = None
    ) -> tuple[bool, str]: ...

    @timeout(TOOL_CALL_TIMEOUT_S)
    async def tool_source(self, agent: str, digest: str) -> bytes: ...

    @timeout(APPROVAL_TIMEOUT_S)
    async def approve(
        self, agent: str, tool: str, arguments: dict[str, Any]
    ) -> tuple[bool, str]: ...

    @timeout(TOOL_CALL_TIMEOUT_S)
    async def advise(self, reviewer: str, arguments: dict[str, Any]) -> tuple[bool, str]: ...

    @timeout(REPORT_TIMEOUT_S)
    async def reviewed(self, report: ReviewReport) -> None: ...

    @timeout(None)  # a compaction is a model request of its own
    async def recover_context(self, uuid: str, reason: str, tokens: int) -> list[Any] | None: ...

    # As long as the provider's batch takes (hours at most): the step waits for its reply.
    @timeout(None)
    async def batch_reply(
        self, agent: str, provider: ProviderName, step: str, request: Request
    ) -> BatchAnswer:
        """A step's request on the batch tier (supervisor/tiers/), known as `step` (the same
        when a restarted turn asks again): its reply, or why it goes on the standard tier
        instead (its batch tries spent), or why it failed."""
        ...
