"""The fork stage of a batch: every task a forked child of one root, at most `concurrency` in
flight, forked in chunks (a fork_many per model, system, schema, tier) as earlier ones end, each
finished task handed on as its record. Runs on a `Grove`: the command's own, or the service's.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
import time
from collections import deque
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, Unpack

from grove.providers.base import DEFAULT_OUTPUT_RETRIES
from grove.providers.errors import GroveError
from grove.supervisor import bridge
from grove.supervisor.batch.defaults import DEFAULT_CONCURRENCY
from grove.supervisor.batch.records import error_record, output_fields, skipped_record, task_record
from grove.supervisor.errors import BUDGET_EXHAUSTED
from grove.supervisor.fork_options import ForkOptions

if TYPE_CHECKING:
    from grove.actors.turn_result import TurnResult
    from grove.supervisor.batch.tasks import Task
    from grove.supervisor.store.records import MessageRecord

WAIT_TICK_S = 1.0  # the longest a run goes without a word (a record or a tick)
ADVICE_WAIT_S = 120.0  # the longest a finished task's record waits for its reviewer
REVIEW_POLL_S = 0.1
# What the runner yields: a finished task's record, or None when a tick passed without one.
Step = dict[str, Any] | None


class BatchGrove(Protocol):
    """What the runner needs of `Grove` (supervisor/api.py has the whole of it)."""

    def fork_many(
        self,
        parent: str,
        prompts: list[str],
        model: str | None = None,
        *,
        system: str | None = None,
        advisor: str | None = None,
        keys: list[str] | None = None,
        output_type: Any = None,
        output_retries: int = DEFAULT_OUTPUT_RETRIES,
        **options: Unpack[ForkOptions],
    ) -> list[str]: ...

    def wait_any(self, agents: list[str], timeout_s: float) -> dict[str, TurnResult | None]: ...

    def answered(self, keys: list[str]) -> dict[str, tuple[str, TurnResult]]: ...

    def wait_reviews(self, agent: str, timeout_s: float = 60.0) -> int: ...

    def advice(self, agent: str) -> list[MessageRecord]: ...

    def cancel(self, agent: str) -> bool: ...

    def release_caches(self, agent: str | None = None) -> int: ...


def batch_key(output: Path) -> str:
    """The key a batch's children are forked under, from its output file: a rerun writing to
    the same file finds the children an interrupted run left."""
    return hashlib.sha256(str(output.resolve()).encode()).hexdigest()[:16]


def is_over_budget(error: str | None) -> bool:
    return error is not None and error.startswith(BUDGET_EXHAUSTED)


class BatchRunner:
    """Runs tasks on `grove` under `root` and yields their records as they finish (a None at
    least every WAIT_TICK_S while none does). Tasks an earlier run of the same `key` finished
    are not run again: their stored answers come first. `options` (ForkOptions: a worktree
    each, the tools they keep) go to every task's child alike. A task's answer is typed by
    its own schema, else by `output_type` (a JSON schema dict or a pydantic model), with
    `output_retries`; an earlier answer that is not checked output (it stayed malformed) is
    not taken: that task runs again. Setting `stop` cancels the tasks in flight and ends the
    run; those run again next time."""

    def __init__(
        self,
        grove: BatchGrove,
        concurrency: int = DEFAULT_CONCURRENCY,
        *,
        advisor: str | None = None,
        key: str = "",
        stop: threading.Event | None = None,
        output_type: Any = None,
        output_retries: int = DEFAULT_OUTPUT_RETRIES,
        options: ForkOptions | None = None,
    ) -> None:
        self.grove = grove
        self.output_type = output_type
        self.output_retries = output_retries
        self.options: ForkOptions = options or {}  # every child's alike
        self.concurrency = concurrency
        self.advisor = advisor
        self.key = key
        self.stop = stop or threading.Event()
        self.in_flight: dict[str, Task] = {}
        # Finished tasks whose reviewer is still at work: their records wait for its advice.
        self.reviewing: dict[str, tuple[dict[str, Any], float]] = {}
        self.over_budget: str | None = None  # why no more tasks are scheduled

    def run(self, root: str, tasks: list[Task]) -> Iterator[Step]:
        pending = deque((yield from self._answered_before(tasks)))
        try:
            while pending or self.in_flight or self.reviewing:
                if self.stop.is_set():
                    for agent in self.in_flight:
                        self.grove.cancel(agent)
                    return
                yield from self._step(root, pending)
                yield None
        finally:  # a provider-side copy of the shared context goes with the batch
            with contextlib.suppress(GroveError):
                self.grove.release_caches(root)

    def _step(self, root: str, pending: deque[Task]) -> Iterator[Step]:
        """Fork what the free slots take, then take in what finished (at most one tick)."""
        yield from self._fork(root, pending)
        if self.over_budget is not None:  # the rest is not run; a rerun picks it up
            while pending:
                yield skipped_record(pending.popleft(), None, self.over_budget)
        if self.in_flight:
            done = self.grove.wait_any(list(self.in_flight), WAIT_TICK_S)
            for agent, result in done.items():
                task = self.in_flight.pop(agent)
                if result is not None and is_over_budget(result.error):
                    self.over_budget = str(result.error)
                    yield skipped_record(task, agent, self.over_budget)
                elif self.advisor is None:
                    yield self._record(task, agent, result)
                else:
                    deadline = time.monotonic() + ADVICE_WAIT_S
                    self.reviewing[agent] = (self._record(task, agent, result), deadline)
        elif self.reviewing:
            bridge.sleep(REVIEW_POLL_S)
        yield from self._advised()

    def _record(self, task: Task, agent: str, result: TurnResult | None) -> dict[str, Any]:
        return task_record(task, agent, result, typed=self.output_of(task) is not None)

    def output_of(self, task: Task) -> Any:
        """What the task's answer must be: its own schema, else the batch's output type."""
        return task.schema if task.schema is not None else self.output_type

    def _finished(self, task: Task, result: TurnResult) -> bool:
        """Whether a stored answer finished the task: a typed task's is checked output."""
        if self.output_of(task) is None:
            return True
        return result.output is not None and result.output_error is None

    def child_key(self, task: Task) -> str:
        """The key a task's child is forked under: this batch's key, this task's id."""
        return f"batch:{self.key}:{task.key}"

    def _answered_before(self, tasks: list[Task]) -> Generator[Step, None, list[Task]]:
        """Tasks an earlier, interrupted run of this batch finished without writing their
        record get it now from the store; the others are returned to run (none runs twice)."""
        found = self.grove.answered([self.child_key(task) for task in tasks])
        left = []
        for task in tasks:
            hit = found.get(self.child_key(task))
            if hit is None or not self._finished(task, hit[1]):
                left.append(task)
            else:
                yield self._record(task, *hit)
        return left

    def _advised(self) -> Iterator[Step]:
        """Records of tasks whose reviewer is done (or out of time), with its advice."""
        for agent, (record, deadline) in list(self.reviewing.items()):
            if self.grove.wait_reviews(agent, 0.0) == 0 or time.monotonic() > deadline:
                del self.reviewing[agent]
                record["advice"] = [
                    {"reviewer": card.data.get("reviewer"), "severity": severity, "note": note}
                    for card in self.grove.advice(agent)
                    for severity, note in card.data.get("notes", [])
                ]
                yield record

    def _fork(self, root: str, pending: deque[Task]) -> Iterator[Step]:
        if self.over_budget is not None:
            return
        free = min(self.concurrency - len(self.in_flight), len(pending))
        groups: dict[tuple[str | None, str | None, str | None, str | None], list[Task]] = {}
        for _ in range(free):
            task = pending.popleft()
            schema = None if task.schema is None else json.dumps(task.schema, sort_keys=True)
            groups.setdefault((task.model, task.system, schema, task.tier), []).append(task)
        for (model, system, _, tier), group in groups.items():
            options: ForkOptions = {**self.options, **({"tier": tier} if tier else {})}
            try:
                agents = self.grove.fork_many(
                    root,
                    [task.prompt for task in group],
                    model,
                    system=system,
                    advisor=self.advisor,
                    keys=[self.child_key(task) for task in group],
                    output_type=self.output_of(group[0]),
                    output_retries=self.output_retries,
                    **options,
                )
            except GroveError as exc:  # refused for these tasks: their records say why
                if is_over_budget(str(exc)):
                    self.over_budget = str(exc)
                for task in group:
                    if self.over_budget:
                        yield skipped_record(task, None, str(exc))
                    elif self.output_of(task) is None:
                        yield error_record(task, None, str(exc))
                    else:
                        yield {**error_record(task, None, str(exc)), **output_fields(None)}
                continue
            self.in_flight.update(zip(agents, group, strict=True))
