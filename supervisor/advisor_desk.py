"""The advisor desk: which reviewers watch which agent, their cursors and backlogs, and the
delivery of their advice (deduplicated, one card per update). Part of the supervisor.
"""

from __future__ import annotations

import asyncio
import time
import uuid as uuidlib
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from grove.actors.advisor_messages import (
    ADVISOR_SYSTEM,
    BOUNDED_TRANSCRIPT_CHARS,
    ReviewerSpec,
    ReviewReport,
    advice_card,
    render_delta,
)
from grove.actors.agent.choice import ModelChoice
from grove.providers.catalog import model_info
from grove.providers.model_specs import ModelSpec
from grove.supervisor.advisor_plan import AdvisorPlan, ReviewerConfig
from grove.supervisor.billing import spent_message
from grove.supervisor.budget_rules import BUDGET_KEYS, budgeted
from grove.supervisor.errors import CommandError
from grove.supervisor.store.records import AgentRecord, MessageRecord
from grove.supervisor.turns import choice_of, turn_open

if TYPE_CHECKING:
    from grove.actors.contract import HostAPI
    from grove.supervisor.store.base import Store
    from grove.supervisor.turns import LiveAgent

SYNC_WAIT_CAP_S = 30.0
INTERRUPTING = ("concern", "blocker")


@dataclass(kw_only=True, slots=True)
class _Watch:
    """One reviewer of one watched agent, as the supervisor sees it."""

    uuid: str
    name: str
    watched: str
    model: ModelSpec
    host: HostAPI
    spec: ReviewerSpec
    cursor: int
    backlog: int = 0
    version: int = -1  # of the reviewer state `backlog` was read from (see `observe`)
    health: dict[str, Any] = field(default_factory=dict)
    notes: list[tuple[str, str]] = field(default_factory=list)  # this update's advice
    warned: bool = False  # one visible warning per outage


class AdvisorCore(Protocol):
    """What the desk uses of the supervisor core (supervisor/core/'s `SupervisorCore`),
    named here so that this module does not import the core that owns it."""

    store: Store

    def agent(self, uuid_or_prefix: str) -> AgentRecord: ...

    def live(self, uuid: str, record: AgentRecord | None = None) -> LiveAgent: ...

    def background(self, work: Coroutine[Any, Any, None]) -> None: ...

    def event(self, kind: str, **payload: Any) -> None: ...

    async def inject(self, uuid: str, message: MessageRecord, *, interrupting: bool) -> None: ...


class AdvisorDesk:
    """Owned by the supervisor core; every reviewer's state and every delivery goes here."""

    def __init__(self, core: AdvisorCore, plan: AdvisorPlan) -> None:
        self.core = core
        self.plan = plan
        self.workspace = plan.workspace
        self.watchdog = plan.watchdog
        self.sync_backlog = plan.sync_backlog
        self.watches: dict[str, _Watch] = {}  # by reviewer uuid
        self._delivered: dict[str, set[str]] = {}  # watched uuid -> notes already given
        self._feeding: dict[str, int] = {}  # watched uuid -> finished turns not yet sent
        self._changed = asyncio.Condition()

    def reviewers_of(self, watched: str) -> list[_Watch]:
        return [watch for watch in self.watches.values() if watch.watched == watched]

    # --- attaching --------------------------------------------------------------------

    async def attach_all(self, watched: str, cursor: int | None = None) -> list[_Watch]:
        """Every configured reviewer on `watched` (those not watching it already)."""
        present = {w.name for w in self.reviewers_of(watched)}
        return [
            await self.attach(watched, reviewer, cursor)
            for reviewer in self.plan.reviewers
            if reviewer.name not in present
        ]

    async def attach(
        self, watched: str, reviewer: ReviewerConfig, cursor: int | None = None
    ) -> _Watch:
        """Start a reviewer on `watched`. Its cursor starts at the current end, so enabling
        mid-session replays nothing; a new child passes its fork point instead."""
        target = self.core.agent(watched)
        if any(w.name == reviewer.name for w in self.reviewers_of(target.uuid)):
            raise CommandError(f"Reviewer {reviewer.name} already watches {target.uuid}")
        record = AgentRecord(
            uuid=str(uuidlib.uuid4()),
            name=reviewer.name,
            role="advisor",
            watched_uuid=target.uuid,
            provider=reviewer.model.provider,
            model=reviewer.model.model,
            thinking_level=reviewer.model.thinking,
            created_at=time.time(),
            # It draws on the watched agent's budgets.
            metadata={key: target.metadata[key] for key in BUDGET_KEYS if key in target.metadata},
        )
        self.core.store.create_agents([record])
        conversation = self.core.store.conversation(target.uuid)
        host = self.core.live(record.uuid).host
        spec = ReviewerSpec(
            uuid=record.uuid,
            name=reviewer.name,
            watched=target.uuid,
            choice=ModelChoice(
                provider=reviewer.model.provider,
                model=reviewer.model.model,
                thinking=reviewer.model.thinking,
            ),
            system="\n\n".join(
                part for part in (ADVISOR_SYSTEM, reviewer.prompt, self.watchdog) if part
            ),
            workspace=self.workspace,
            budgeted=budgeted(record.metadata),
            context_window=model_info(reviewer.model.model).max_input_tokens,
        )
        await asyncio.wait_for(host.add_reviewer(spec), 30)
        watch = _Watch(
            uuid=record.uuid,
            name=reviewer.name,
            watched=target.uuid,
            model=reviewer.model,
            host=host,
            spec=spec,
            cursor=cursor if cursor is not None else (conversation[-1].id if conversation else 0),
        )
        self.watches[record.uuid] = watch
        self.core.event("AdvisorToggled", agent=target.uuid, reviewer=reviewer.name, on=True)
        return watch

    async def restore(self, reviewers: Sequence[AgentRecord]) -> None:
        """After a supervisor restart: each reviewer the one before ran (its record, running
        until then, is ended now) watches its agent again, started anew with the same name
        and model. Its cursor is before the agent's turn that was cut off, whose whole delta
        it gets when that turn ends (with none, at the end: nothing older is replayed). One
        that cannot start is given up with an event; the agent goes on without it."""
        for record in reviewers:
            uuid = record.watched_uuid
            watched = self.core.store.get_agent(uuid) if uuid is not None else None
            choice = choice_of(record)
            if watched is None or choice is None or watched.status != "running":
                continue
            model = ModelSpec(
                provider=choice.provider, model=choice.model, thinking=choice.thinking
            )
            configured = [
                r for r in self.plan.reviewers if (r.name, r.model) == (record.name, model)
            ]
            reviewer = (
                configured[0]
                if configured
                else ReviewerConfig(name=record.name or "advisor", model=model)
            )
            own = self.core.store.agent_messages(watched.uuid)
            prompts = [m.id for m in own if m.kind == "user"]
            cursor = prompts[-1] - 1 if prompts and turn_open(own) else None
            try:
                await self.attach(watched.uuid, reviewer, cursor)
            except Exception as exc:  # the watched agent goes on unreviewed
                self.core.event(
                    "AdvisorLost", agent=watched.uuid, reviewer=reviewer.name, error=str(exc)
                )

    async def host_replaced(self, host: HostAPI) -> None:
        """The reviewers that lived on a replaced host start again there, with empty queues."""
        for watch in self.watches.values():
            if watch.host is host:
                await asyncio.wait_for(host.add_reviewer(watch.spec), 30)
                watch.backlog, watch.version = 0, -1  # a new reviewer counts from 0 again
        await self._notify()

    async def detach(self, watched: str) -> list[str]:
        names = []
        for watch in self.reviewers_of(watched):
            await asyncio.wait_for(watch.host.drop_reviewer(watch.uuid), 30)
            self.core.store.update_agent(watch.uuid, status="dead", ended_at=time.time())
            del self.watches[watch.uuid]
            names.append(watch.name)
            self.core.event("AdvisorToggled", agent=watched, reviewer=watch.name, on=False)
        await self._notify()
        return names

    # --- feeding ----------------------------------------------------------------------

    def feed(self, watched: str) -> None:
        """A turn of `watched` finished: its delta goes to the reviewers in the background,
        counted in the backlog from now on so that nobody waiting misses it."""
        self._feeding[watched] = self._feeding.get(watched, 0) + 1
        self.core.background(self._feed(watched))

    async def _feed(self, watched: str) -> None:
        try:
            await self.turn_completed(watched)
        finally:
            self._feeding[watched] -= 1
            await self._notify()

    async def turn_completed(self, watched: str) -> None:
        """Send each reviewer of `watched` what happened since its cursor."""
        watches = self.reviewers_of(watched)
        if not watches:
            return
        conversation = self.core.store.conversation(watched)
        for watch in watches:
            delta = [m for m in conversation if m.id > watch.cursor]
            if not delta:
                continue
            watch.cursor = delta[-1].id
            text = render_delta(delta)
            if text.strip():
                version, backlog = await asyncio.wait_for(watch.host.review(watch.uuid, text), 30)
                observe(watch, version, backlog)
        await self._notify()

    async def reset(self, watched: str) -> None:
        """The watched transcript was rewritten: each reviewer starts over from what is there
        now (bounded), and nobody waits on the old backlog."""
        conversation = self.core.store.conversation(watched)
        primer = render_delta(conversation)[-BOUNDED_TRANSCRIPT_CHARS:]
        last = self.core.store.last_message_id()
        for watch in self.reviewers_of(watched):
            watch.cursor = last
            watch.notes.clear()
            version, backlog = await asyncio.wait_for(
                watch.host.reset_reviewer(watch.uuid, primer), 30
            )
            observe(watch, version, backlog)
        await self._notify()

    # --- advice -----------------------------------------------------------------------

    def advise(self, reviewer: str, note: str, severity: str) -> str:
        watch = self.watches.get(reviewer)
        if watch is None:
            raise CommandError("this reviewer is no longer attached")
        given = self._given(watch.watched)
        key = " ".join(note.lower().split())
        if key in given or any(" ".join(n.lower().split()) == key for _, n in watch.notes):
            return "Already given; not sent again."
        watch.notes.append((severity, note))
        return "Noted; it reaches the agent when this review ends."

    def _given(self, watched: str) -> set[str]:
        given = self._delivered.get(watched)
        if given is None:
            given = self._delivered[watched] = {
                " ".join(str(note).lower().split())
                for message in self.core.store.agent_messages(watched)
                if message.kind == "advisor"
                for _, note in message.data.get("notes", [])
            }
        return given

    async def reviewed(self, report: ReviewReport) -> None:
        """A reviewer finished an update: deliver its notes as one card, track its health."""
        watch = self.watches.get(report.reviewer)
        if watch is None:
            return
        observe(watch, report.version, report.backlog)
        watch.health = report.health
        if report.spent:  # what its requests used, counted with its tree's
            self.core.store.append_messages(
                [spent_message(report.reviewer, data) for data in report.spent]
            )
        if report.ok:
            watch.warned = False
            notes, watch.notes = watch.notes, []
            if notes:
                await self._deliver(watch, notes)
        elif report.dropped:
            watch.notes.clear()
            if not watch.warned:
                watch.warned = True
                text = (
                    f"Advisor {watch.name} failed three times in a row "
                    f"({report.error or 'no reason given'}); its backlog was dropped."
                )
                self.core.store.append_message(watch.watched, "warning", text, {})
                self.core.event(
                    "AdvisorFailing", agent=watch.watched, reviewer=watch.name, error=report.error
                )
        await self._notify()

    async def _deliver(self, watch: _Watch, notes: list[tuple[str, str]]) -> None:
        given = self._given(watch.watched)
        fresh = [(s, n) for s, n in notes if " ".join(n.lower().split()) not in given]
        if not fresh:
            return
        interrupting = any(severity in INTERRUPTING for severity, _ in fresh)
        card = advice_card(fresh, watch.name)
        data = {"notes": [[s, n] for s, n in fresh], "reviewer": watch.name}
        message = self.core.store.append_message(watch.watched, "advisor", card, data)
        given.update(" ".join(n.lower().split()) for _, n in fresh)
        self.core.event(
            "AdviceDelivered",
            agent=watch.watched,
            reviewer=watch.name,
            notes=len(fresh),
            interrupting=interrupting,
            message_id=message.id,
        )
        await self.core.inject(watch.watched, message, interrupting=interrupting)

    # --- waiting ----------------------------------------------------------------------

    def backlog(self, watched: str) -> int:
        """The largest queue among the reviewers of `watched`, deltas not yet sent included."""
        queued = max((w.backlog for w in self.reviewers_of(watched)), default=0)
        return queued + self._feeding.get(watched, 0)

    async def wait_for_backlog(self, watched: str, cancelled: asyncio.Event) -> float:
        """`sync_backlog`: before a turn, wait while a reviewer's backlog is at or above the
        threshold; at most 30 s; a cancel or reset releases it at once. Returns the wait."""
        if self.sync_backlog == "off":
            return 0.0
        threshold = int(self.sync_backlog)
        started = time.monotonic()
        deadline = started + SYNC_WAIT_CAP_S
        async with self._changed:
            while self.backlog(watched) >= threshold and not cancelled.is_set():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                try:
                    await asyncio.wait_for(self._changed.wait(), remaining)
                except TimeoutError:
                    break
        return time.monotonic() - started

    async def wait_idle(self, watched: str, timeout_s: float) -> int:
        """Wait until every reviewer of `watched` is done with its queue (batch jobs record
        the advice a task received); the backlog left after `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        async with self._changed:
            while self.backlog(watched) > 0:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                try:
                    await asyncio.wait_for(self._changed.wait(), remaining)
                except TimeoutError:
                    break
        return self.backlog(watched)

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def release_waiters(self) -> None:
        await self._notify()

    # --- reporting --------------------------------------------------------------------

    def advice_given(self, watched: str) -> list[MessageRecord]:
        return [m for m in self.core.store.agent_messages(watched) if m.kind == "advisor"]


def observe(watch: _Watch, version: int, backlog: int) -> None:
    """Take a reviewer's backlog only if it is newer than what is known: a report and the
    answer to an update can arrive in either order."""
    if version > watch.version:
        watch.backlog, watch.version = backlog, version
