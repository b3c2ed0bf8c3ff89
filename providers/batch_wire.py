"""The contract between a vendor's batch API and the supervisor's collectors (SPEC 20): what
a batch holds, what it answered, and the `BatchWire` each vendor package implements.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal, Protocol

from grove.providers import preserved_thinking
from grove.providers.base import AssistantTurn, ProviderName, Request
from grove.providers.errors import ProviderError
from grove.providers.http import Endpoint

BatchStatus = Literal["in_progress", "ended"]
OutcomeKind = Literal["succeeded", "errored", "expired", "canceled"]


@dataclass(frozen=True, kw_only=True, slots=True)
class BatchItem:
    """One step's request in a batch, known to the vendor by `custom_id`."""

    custom_id: str
    request: Request


@dataclass(frozen=True, kw_only=True, slots=True)
class BatchLimits:
    """The vendor's limits on one batch: requests and bytes of the body (or input file)."""

    max_requests: int
    max_bytes: int


class BatchItemTooLarge(ProviderError):
    """One item's request is larger than a whole batch may be (`split` refuses it): it can
    only go on the standard tier. `custom_id` names it."""

    def __init__(self, message: str, *, provider: str, custom_id: str) -> None:
        super().__init__(message, provider=provider)
        self.custom_id = custom_id


@dataclass(frozen=True, kw_only=True, slots=True)
class BatchOutcome:
    """What the vendor answered for one custom id: a turn when it succeeded, else why not."""

    custom_id: str
    kind: OutcomeKind
    turn: AssistantTurn | None = None
    error: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class BatchResults:
    """A whole batch's results. Lines that name an id the batch never held, lines that
    cannot be read, and ids with no line are counted, never mapped to a step. An id whose
    only line could not be read is one of `missing_ids` (and its line is malformed)."""

    outcomes: dict[str, BatchOutcome] = field(default_factory=dict)
    unknown_ids: int = 0
    malformed_lines: int = 0
    missing_ids: tuple[str, ...] = ()


def as_streamed(provider: ProviderName, request: Request, turn: AssistantTurn) -> AssistantTurn:
    """A batched `turn` with what the streaming path adds from the `request` it answers (the
    collector holds it under the custom id): where the model binds its thinking to a prefix
    (providers/preserved_thinking.py), each thinking block stamped with that prefix; the
    tier it went on, which its stored reply records (`grove usage --by tier`)."""
    _, prefix = preserved_thinking.bound(provider, request)
    return replace(preserved_thinking.stamped(turn, prefix), tier=request.tier)


class BatchWire(Protocol):
    """One vendor's batch API over HTTP. Every call is one (or, to upload a file, two)
    HTTP exchanges; none waits for the batch to end: the collector polls."""

    provider: ProviderName
    limits: BatchLimits

    def split(self, items: Sequence[BatchItem]) -> list[list[BatchItem]]:
        """`items` cut into batches within `limits`, in order (BatchItemTooLarge for one
        that no batch can hold)."""
        ...

    async def submit(self, items: Sequence[BatchItem], endpoint: Endpoint) -> str:
        """Send one batch (within `limits`); the vendor's batch id."""
        ...

    async def status(self, batch_id: str, endpoint: Endpoint) -> BatchStatus:
        """Whether the batch has ended (succeeded, errored, expired or canceled as a whole)."""
        ...

    async def results(
        self, batch_id: str, custom_ids: Sequence[str], endpoint: Endpoint
    ) -> BatchResults:
        """An ended batch's results for the ids it was sent with."""
        ...

    async def cancel(self, batch_id: str, endpoint: Endpoint) -> None:
        """Ask the vendor to cancel the batch; its requests not yet run end `canceled`."""
        ...

    async def discard(self, batch_id: str, endpoint: Endpoint) -> None:
        """Delete what the vendor keeps of an ended batch (the batch, or its files); only once
        none of its steps is stored any more (a restart polls a stored step's batch again)."""
        ...

    async def aclose(self) -> None: ...
