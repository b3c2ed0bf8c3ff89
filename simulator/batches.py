"""Provider batches as the simulator keeps them, in no vendor's terms: their requests, when each
ends, which requests end errored or expired, and the order their results are reported in.

Each vendor's batch wire lives beside its API (anthropic/batches.py, openai/batches.py,
google/batches.py); a batched request is answered as the same request sent alone would be.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from grove.simulator.config import SimulatorConfig
from grove.simulator.http11 import HTTPRequest
from grove.simulator.wire import JSON_CONTENT_TYPE, Reply, SimulatedAPI

Outcome = Literal["succeeded", "errored", "expired", "canceled"]
# Answers one request as the simulator answers it alone: its endpoint's path and its body.
Answerer = Callable[[str, dict[str, Any]], Reply]


class BatchWire(Protocol):
    """One vendor's batch routes, with its API's keys and errors (`api`)."""

    @property
    def api(self) -> SimulatedAPI: ...

    def handles(self, request: HTTPRequest) -> bool: ...

    def answer(self, request: HTTPRequest, body: Any) -> Reply:
        """`body`: the request's JSON, or None when it sent none (a file upload, a GET)."""
        ...


def batch_route_answer(wire: BatchWire, request: HTTPRequest, key: str) -> Reply:
    """A batch route's answer: the key checked, then a JSON body (if any) read."""
    problem = wire.api.authenticate(request.headers, request.query, key)
    if problem is not None:
        return wire.api.error(problem)
    body: Any = None
    if request.body and request.headers.get("content-type", "").startswith(JSON_CONTENT_TYPE):
        try:
            body = json.loads(request.body)
        except (ValueError, RecursionError):
            return wire.api.error("bad_json")
    return wire.answer(request, body)


@dataclass(frozen=True, slots=True)
class BatchedRequest:
    custom_id: str
    path: str  # the endpoint the request goes to, as if sent alone
    body: dict[str, Any]
    metadata: Any = None  # what the vendor hands back beside the request's result


@dataclass(frozen=True, slots=True)
class BatchResult:
    """One request's end: a succeeded one's 200 reply, an errored one's error reply, none for
    one expired or canceled."""

    request: BatchedRequest
    outcome: Outcome
    reply: Reply | None = None


@dataclass(slots=True)
class Batch:
    """One batch. `details` holds what its vendor's wire wants kept (an endpoint, a file)."""

    id: str
    vendor: str
    requests: list[BatchedRequest]
    created_at: float
    ends_at: float
    details: dict[str, Any] = field(default_factory=dict)
    cancel_requested_at: float | None = None
    ended_at: float | None = None
    results: list[BatchResult] = field(default_factory=list)

    @property
    def ended(self) -> bool:
        return self.ended_at is not None

    def count(self, outcome: Outcome) -> int:
        return sum(result.outcome == outcome for result in self.results)


class BatchBook:
    """Every batch of one simulator. A batch ends `batch_delay_s` after it was made, or at the
    first look after a cancel; then its requests are answered, a share of them errored (the
    vendor's server error) or expired instead, as drawn from the seeded generator."""

    def __init__(self, config: SimulatorConfig, answer: Answerer) -> None:
        self._config = config
        self._answer = answer
        self._draws = random.Random(config.seed)
        self._batches: dict[str, Batch] = {}
        self._lock = threading.Lock()

    def create(
        self,
        vendor: str,
        batch_id: str,
        requests: list[BatchedRequest],
        details: dict[str, Any] | None = None,
    ) -> Batch:
        now = time.time()
        batch = Batch(
            id=batch_id,
            vendor=vendor,
            requests=requests,
            created_at=now,
            ends_at=now + self._config.batch_delay_s,
            details=details or {},
        )
        with self._lock:
            self._batches[batch_id] = batch
        return batch

    def find(self, vendor: str, batch_id: str) -> Batch | None:
        """The vendor's batch of that id (ended if its time has come), or None."""
        with self._lock:
            batch = self._batches.get(batch_id)
            if batch is None or batch.vendor != vendor:
                return None
            self._settle(batch)
            return batch

    def newest_first(self, vendor: str) -> list[Batch]:
        with self._lock:
            batches = [b for b in self._batches.values() if b.vendor == vendor]
            for batch in batches:
                self._settle(batch)
        return sorted(batches, key=lambda batch: batch.created_at, reverse=True)

    def forget(self, batch: Batch) -> None:
        with self._lock:
            self._batches.pop(batch.id, None)

    def cancel(self, batch: Batch) -> None:
        """Ask a batch to stop: one not ended yet ends at the next look, its requests canceled."""
        with self._lock:
            if not batch.ended and batch.cancel_requested_at is None:
                batch.cancel_requested_at = time.time()

    def _settle(self, batch: Batch) -> None:
        if batch.ended:
            return
        now = time.time()
        if batch.cancel_requested_at is not None:
            batch.results = [BatchResult(request, "canceled") for request in batch.requests]
        elif now >= batch.ends_at:
            batch.results = self._process(batch.requests)
        else:
            return
        batch.ended_at = now

    def _process(self, requests: list[BatchedRequest]) -> list[BatchResult]:
        """Each request answered, or errored or expired by the configured shares; the results
        in the drawn order."""
        count = len(requests)
        errored = round(count * self._config.batch_errored)
        expired = min(round(count * self._config.batch_expired), count - errored)
        drawn = self._draws.sample(range(count), errored + expired)
        fates: dict[int, Outcome] = dict.fromkeys(drawn[:errored], "errored")
        fates.update(dict.fromkeys(drawn[errored:], "expired"))
        results: list[BatchResult] = []
        for index, request in enumerate(requests):
            fate = fates.get(index)
            if fate == "expired":
                results.append(BatchResult(request, "expired"))
            elif fate == "errored":
                results.append(BatchResult(request, "errored"))
            else:
                reply = self._answer(request.path, request.body)
                outcome: Outcome = "succeeded" if reply.status == 200 else "errored"
                results.append(BatchResult(request, outcome, reply))
        self._draws.shuffle(results)
        return results
