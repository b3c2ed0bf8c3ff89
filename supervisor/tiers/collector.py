"""`BatchCollector`: the steps on the batch tier of one provider and key, gathered into provider
batches (stored before each is sent), polled with backoff and answered by custom id.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from grove.actors.agent.batched import BatchAnswer
from grove.providers.base import ProviderName, Request
from grove.providers.batch_wire import (
    BatchItem,
    BatchItemTooLarge,
    BatchResults,
    BatchWire,
    as_streamed,
)
from grove.providers.errors import GroveError, ProviderConnectionError, ProviderHTTPError
from grove.providers.http import Endpoint
from grove.providers.secrets import mask
from grove.supervisor.store.base import Store
from grove.supervisor.store.batch_steps import BatchStepRecord
from grove.supervisor.tiers.plan import BatchPlan
from grove.supervisor.tiers.routing import MISSING, routed

Event = Callable[..., None]  # the core's event log: (kind, **payload)
NOT_FOUND = 404
TOO_LARGE = 413


@dataclass(kw_only=True, slots=True)
class Waiting:
    """A step on the batch tier: its record (as stored once sent), its request (None after a
    restart, until the step asks again), who waits for it, and its answer once known."""

    record: BatchStepRecord
    request: Request | None
    futures: list[asyncio.Future[BatchAnswer]] = field(default_factory=list)
    answer: BatchAnswer | None = None


class BatchCollector:
    """One provider and key's steps on the batch tier. Each step is sent in a batch until it
    is answered, at most `plan.tries` times (errored, expired or missing results go again;
    then the standard tier takes it); its answer is kept
    until its agent asks for its next step (a step that asks again, after its host died,
    gets it once more), and so is its stored record (a restarted supervisor fetches the
    batch's results again instead of sending it again)."""

    def __init__(
        self,
        wire: BatchWire,
        endpoint: Endpoint,
        account: str,
        store: Store,
        plan: BatchPlan,
        event: Event,
    ) -> None:
        self.provider: ProviderName = wire.provider
        self.account = account
        self._wire = wire
        self._endpoint = endpoint
        self._store = store
        self._plan = plan
        self._event = event
        self._steps: dict[str, Waiting] = {}
        self._queue: list[str] = []  # steps to send, in the order they came
        self._queued = asyncio.Event()
        self._open: dict[str, dict[str, str]] = {}  # batch id -> custom id -> step, as sent
        self._kept: dict[str, set[str]] = {}  # routed batch id -> its steps still stored
        self._tasks: set[asyncio.Task[None]] = set()
        self._sender: asyncio.Task[None] | None = None

    async def reply(self, agent: str, step: str, request: Request) -> BatchAnswer:
        """The answer to a step's request: joins the next batch, or the batch it is in."""
        waiting = self._steps.get(step)
        if waiting is None:
            self._done_with(agent)
            record = BatchStepRecord(
                step=step,
                agent=agent,
                provider=self.provider,
                account=self.account,
                attempt=1,
                sent_at=time.time(),
            )
            waiting = self._steps[step] = Waiting(record=record, request=request)
            self._enqueue(step)
        elif waiting.answer is not None:
            return self._as_streamed(waiting.answer, request)
        else:
            waiting.request = request
            if waiting.record.batch_id is None and step not in self._queue:
                self._enqueue(step)  # tried again while the step was away
        self._event(
            "BatchWaiting", agent=agent, provider=self.provider, step=step, model=request.model
        )
        future: asyncio.Future[BatchAnswer] = asyncio.get_running_loop().create_future()
        waiting.futures.append(future)
        return self._as_streamed(await future, request)

    def _as_streamed(self, answer: BatchAnswer, request: Request) -> BatchAnswer:
        """A reply as the step would have had it streamed (what its request adds to it)."""
        if answer.turn is None:
            return answer
        return replace(answer, turn=as_streamed(self.provider, request, answer.turn))

    def resume(self, records: list[BatchStepRecord]) -> None:
        """After a restart: the stored steps of batches sent before it, polled again."""
        batches: dict[str, dict[str, str]] = {}
        for record in records:
            self._steps[record.step] = Waiting(record=record, request=None)
            assert record.batch_id is not None
            batches.setdefault(record.batch_id, {})[record.custom_id] = record.step
        for batch_id, sent in batches.items():
            self._open[batch_id] = sent
            sent_at = min(self._steps[step].record.sent_at for step in sent.values())
            self._spawn(self._poll(batch_id, sent_at))
        if batches:
            self._event(
                "BatchesResumed", provider=self.provider, batches=len(batches), steps=len(records)
            )

    async def cancel(self, agent: str) -> None:
        """The agent's turn was cancelled: its steps stop waiting, and the vendor cancels each
        batch of them that no other step waits on."""
        mine = [s for s, w in self._steps.items() if w.record.agent == agent and w.answer is None]
        for step in mine:
            self._answer(step, BatchAnswer(error="cancelled"))
            self._queue = [queued for queued in self._queue if queued != step]
        self._forget(mine)
        for batch_id, sent in list(self._open.items()):
            if set(sent.values()) & set(mine) and not self._members(batch_id):
                await self._cancel_batch(batch_id)

    async def aclose(self) -> None:
        for task in [*self._tasks, *([self._sender] if self._sender else [])]:
            task.cancel()
        await self._wire.aclose()

    # ----- sending ------------------------------------------------------------------------

    def _enqueue(self, step: str) -> None:
        self._queue.append(step)
        self._queued.set()
        if self._sender is None or self._sender.done():
            self._sender = asyncio.get_running_loop().create_task(self._send_loop())

    async def _send_loop(self) -> None:
        """Every `window_s` from the first step queued (or as soon as `size` are), the steps
        queued go out."""
        loop = asyncio.get_running_loop()
        while self._queue:
            deadline = loop.time() + self._plan.window_s
            while len(self._queue) < self._plan.size and loop.time() < deadline:
                self._queued.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._queued.wait(), deadline - loop.time())
            steps, self._queue = self._queue[: self._plan.size], self._queue[self._plan.size :]
            await self._send(steps)

    async def _send(self, steps: list[str]) -> None:
        items = [
            BatchItem(custom_id=waiting.record.custom_id, request=waiting.request)
            for waiting in (self._steps[step] for step in steps if self._awaited(step))
            if waiting.request is not None
        ]
        while items:
            try:
                batches = self._wire.split(items)
            except BatchItemTooLarge as exc:  # that one goes on the standard tier
                self._standard(self._step_of(exc.custom_id), "too large for a provider batch")
                items = [item for item in items if item.custom_id != exc.custom_id]
                continue
            except Exception as exc:  # a request the wire cannot build: none of them goes
                self._fail([self._step_of(item.custom_id) for item in items], mask(str(exc)))
                return
            for batch in batches:
                await self._submit([self._step_of(item.custom_id) for item in batch], batch)
            return

    async def _submit(self, steps: list[str], items: list[BatchItem]) -> None:
        """One batch: its steps stored, sent, stored again with the vendor's batch id."""
        records = [self._steps[step].record for step in steps]
        try:
            self._store.batch_steps.put(records)
        except GroveError as exc:  # not sent: nothing is paid, the steps fail
            self._fail(steps, f"the store could not keep the batch: {exc}")
            return
        try:
            batch_id = await self._wire.submit(items, self._endpoint)
        except Exception as exc:
            self._event("BatchNotSent", provider=self.provider, error=mask(str(exc))[:300])
            too_large = isinstance(exc, ProviderHTTPError) and exc.status == TOO_LARGE
            if (too_large or isinstance(exc, ProviderConnectionError)) and len(items) > 1:
                half = len(items) // 2  # sent again in halves; no try is counted for that
                await self._submit(steps[:half], items[:half])
                await self._submit(steps[half:], items[half:])
                return
            if too_large:
                self._standard(steps[0], "too large for a provider batch")
                return
            if isinstance(exc, ProviderHTTPError) and not exc.retryable:  # refused: it would be
                self._fail(steps, mask(str(exc)))  # again (a bad key, a request it rejects)
                return
            for step in steps:  # they go again (this counts as a try)
                self._again(step, "not sent")
            return
        for step in steps:
            waiting = self._steps[step]
            waiting.record = waiting.record.model_copy(update={"batch_id": batch_id})
        with contextlib.suppress(GroveError):  # unknown, a restart sends them again
            self._store.batch_steps.put([self._steps[step].record for step in steps])
        self._open[batch_id] = {item.custom_id: self._step_of(item.custom_id) for item in items}
        self._event("BatchSent", provider=self.provider, batch=batch_id, requests=len(steps))
        self._spawn(self._poll(batch_id, time.time()))

    # ----- polling and routing ------------------------------------------------------------

    async def _poll(self, batch_id: str, sent_at: float) -> None:
        """Ask whether the batch (sent at `sent_at`, by the clock) ended, until it has; then
        route its results. The polls back off as the batch ages (`BatchPlan.poll_wait`). A
        batch the vendor does not know (any more) ends with every line missing."""
        while True:
            await asyncio.sleep(self._plan.poll_wait(time.time() - sent_at))
            try:
                if await self._wire.status(batch_id, self._endpoint) != "ended":
                    continue
                sent = list(self._open.get(batch_id, {}))  # every line of it is known
                results = await self._wire.results(batch_id, sent, self._endpoint)
            except Exception as exc:  # the vendor is asked again after the next wait
                self._event("BatchPollFailed", batch=batch_id, error=mask(str(exc))[:300])
                if isinstance(exc, ProviderHTTPError) and exc.status == NOT_FOUND:
                    break  # the vendor has no such batch (any more): its steps go again
                continue
            self._route(batch_id, results)
            return
        missing = BatchResults(missing_ids=tuple(self._open.get(batch_id, {})))
        self._route(batch_id, missing, known=False)

    def _route(self, batch_id: str, results: BatchResults, *, known: bool = True) -> None:
        """Each step of the batch answered by its own custom id (routing.py); the vendor's
        copy of it (if it still has one) discarded once none of its steps is stored."""
        members = {self._steps[step].record.custom_id: step for step in self._members(batch_id)}
        self._open.pop(batch_id, None)
        routing = routed(members, results)
        for step, outcome in routing.outcomes.items():
            if outcome is not None and outcome.turn is not None:
                self._answer(step, BatchAnswer(turn=outcome.turn))
            else:
                self._again(step, outcome.kind if outcome is not None else MISSING)
        self._event("BatchEnded", provider=self.provider, batch=batch_id, **routing.counts)
        if known:
            self._kept[batch_id] = {
                step
                for step in routing.outcomes
                if step in self._steps and self._steps[step].record.batch_id == batch_id
            }
            self._release([])  # discarded now if no step of it is kept
        if routing.rejected:
            self._event(
                "BatchResultsRejected", provider=self.provider, batch=batch_id, **routing.rejected
            )

    def _again(self, step: str, why: str) -> None:
        """A step whose try ended without a reply: in the next batch, or, its tries spent,
        on the standard tier."""
        waiting = self._steps[step]
        with contextlib.suppress(GroveError):  # nothing of it is open any more
            self._store.batch_steps.drop([step])
        tries = self._plan.tries
        if tries is not None and waiting.record.attempt >= tries:
            self._standard(step, f"{waiting.record.attempt} batch tries ended {why}")
            return
        attempt = waiting.record.attempt + 1
        waiting.record = waiting.record.model_copy(
            update={"attempt": attempt, "batch_id": None, "sent_at": time.time()}
        )
        self._event("BatchRetried", agent=waiting.record.agent, step=step, attempt=attempt, why=why)
        if waiting.request is not None and self._awaited(step):
            self._enqueue(step)

    def _standard(self, step: str, why: str) -> None:
        self._answer(step, BatchAnswer(standard=why))
        self._forget([step])

    def _fail(self, steps: list[str], why: str) -> None:
        for step in steps:
            self._answer(step, BatchAnswer(error=why))
        self._forget(steps)

    def _answer(self, step: str, answer: BatchAnswer) -> None:
        waiting = self._steps[step]
        waiting.answer = answer
        outcome = "reply" if answer.turn else "standard" if answer.standard else "failed"
        self._event("BatchAnswered", agent=waiting.record.agent, step=step, outcome=outcome)
        for future in waiting.futures:
            if not future.done():
                future.set_result(answer)
        waiting.futures.clear()

    async def _discard(self, batch_id: str) -> None:
        try:
            await self._wire.discard(batch_id, self._endpoint)
        except Exception as exc:  # best effort: the vendor keeps it until it expires
            self._event("BatchDiscardFailed", batch=batch_id, error=mask(str(exc))[:300])
        else:
            self._event("BatchDiscarded", provider=self.provider, batch=batch_id)

    async def _cancel_batch(self, batch_id: str) -> None:
        self._event("BatchCancelled", provider=self.provider, batch=batch_id)
        try:
            await self._wire.cancel(batch_id, self._endpoint)
        except Exception as exc:  # it ends in its own time; its results are dropped
            self._event("BatchCancelFailed", batch=batch_id, error=mask(str(exc))[:300])

    # ----- bookkeeping --------------------------------------------------------------------

    def _members(self, batch_id: str) -> list[str]:
        """The steps a batch still answers: not forgotten (cancelled, say), nor asked again
        under the same name since and waiting elsewhere."""
        return [
            step
            for custom_id, step in self._open.get(batch_id, {}).items()
            if step in self._steps
            and self._steps[step].record.batch_id == batch_id
            and self._steps[step].record.custom_id == custom_id
            and self._steps[step].answer is None
        ]

    def _awaited(self, step: str) -> bool:
        """Whether a step is still to be answered (someone waits, or may ask again)."""
        waiting = self._steps.get(step)
        return waiting is not None and waiting.answer is None

    def _step_of(self, custom_id: str) -> str:
        return custom_id.rpartition("-")[0]

    def _done_with(self, agent: str) -> None:
        """An agent asks for a new step: the answers to its earlier ones are done with."""
        done = [s for s, w in self._steps.items() if w.record.agent == agent and w.answer]
        self._forget(done)

    def _forget(self, steps: list[str]) -> None:
        """Steps done with, dropped from the store; a routed batch none of whose steps is
        stored any more is discarded (while one is, a restart polls the batch again)."""
        for step in steps:
            self._steps.pop(step, None)
        try:
            self._store.batch_steps.drop(steps)
        except GroveError:  # kept, they are polled once more after a restart
            return
        self._release(steps)

    def _release(self, dropped: list[str]) -> None:
        """`dropped` no longer stored: each routed batch left with no stored step is
        discarded at the vendor."""
        for batch_id, kept in list(self._kept.items()):
            kept.difference_update(dropped)
            if not kept:
                del self._kept[batch_id]
                self._spawn(self._discard(batch_id))

    def _spawn(self, work: Any) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
