"""Provider caching where children are forked: the first child of a cold shared prefix goes
alone and the rest follow once its reply has begun (one cache write, not one per child); a
Gemini prefix gets a `cachedContents` entry that every child names, deleted at the end.

The agents mark fork points in their requests themselves (actors/transcript.py); this module
only decides when children start, and keeps the entries it made.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from grove.actors.agent.choice import ModelChoice
from grove.actors.contract import HOST_CALL_TIMEOUT_S, HostAPI
from grove.actors.host.tickets import Activation, Ticket
from grove.actors.ray_proxy import RayCall
from grove.providers.base import CachePolicy
from grove.providers.catalog import model_info
from grove.providers.errors import GroveError
from grove.supervisor.context import estimate_tokens
from grove.supervisor.prefixes import ConversationTokens
from grove.supervisor.store.base import Store
from grove.supervisor.store.records import AgentRecord
from grove.supervisor.turns import LiveAgent, TurnTicket, choice_of

# The longest the other children wait for the first one's reply to begin.
WARM_WAIT_S = 30.0
# A prefix counts as cached this share of its lifetime after a fork from it last started.
WARM_SHARE = 0.8
# An explicit entry is made again when less than this share of its lifetime is left.
RENEW_SHARE = 0.5
START_TIMEOUT_S = 60.0  # a host's start_many and create_cache, as this module waits for them
T = TypeVar("T")
Started = list[tuple[str, list[tuple[Ticket, Activation]], BaseException | None]]


@dataclass(frozen=True, kw_only=True, slots=True)
class SharedPrefix:
    """What children forked together send alike: `key` says what makes it one prefix (the
    parent and point, and the model, thinking, system prompt and tools of the children)."""

    key: tuple[Any, ...]
    parent: str
    choice: ModelChoice
    tokens: int  # about how long it is


@dataclass(slots=True)
class _Made:
    name: str
    parent: str
    choice: ModelChoice
    host: HostAPI
    renew_at: float


class ForkCore(Protocol):
    """What of the supervisor's core this module uses (supervisor/core/)."""

    cache: CachePolicy | None
    store: Store

    def live(self, uuid: str, record: AgentRecord | None = None) -> LiveAgent: ...

    def event(self, kind: str, **payload: Any) -> None: ...


class ForkCaches:
    """The warm-ups and explicit entries of one supervisor (its `[cache]`: `core.cache`)."""

    def __init__(self, core: ForkCore, wait_s: float = WARM_WAIT_S) -> None:
        self._core = core
        self.wait_s = wait_s
        self._warm_until: dict[tuple[Any, ...], float] = {}
        self._warming: dict[tuple[Any, ...], asyncio.Event] = {}
        self._made: dict[tuple[Any, ...], _Made] = {}
        self._renewed: list[_Made] = []  # replaced by newer entries, deleted with them
        self._refused: set[tuple[str, str]] = set()  # (provider, model) without explicit caches
        self._tokens = ConversationTokens()  # how long each parent's conversation is

    @property
    def policy(self) -> CachePolicy | None:
        return self._core.cache

    def prefix(self, child: AgentRecord, point: int, tokens: int) -> SharedPrefix | None:
        """The prefix `child` shares with its siblings, or None when nothing of it would be
        cached: caching is off, or it is shorter than the model's minimum."""
        choice = choice_of(child)
        if self.policy is None or choice is None or child.parent_uuid is None:
            return None
        system = child.metadata.get("system")
        tokens += estimate_tokens(system or "")
        try:
            minimum = model_info(choice.model, choice.provider).cache_min_tokens
        except GroveError:
            return None
        if tokens < minimum:
            return None
        tools = child.metadata.get("tools")
        key = (child.parent_uuid, point, choice, system, repr(tools))
        return SharedPrefix(key=key, parent=child.parent_uuid, choice=choice, tokens=tokens)

    async def warm_start(
        self,
        prefix: SharedPrefix | None,
        start: Callable[[], Awaitable[T]],
        started: Callable[[T], Awaitable[object]],
    ) -> T:
        """`start()` a child's turn. The first one on a prefix not cached yet goes alone: the
        others wait (at most `wait_s`) until `started(its result)` says its reply began, or it
        failed, then go. Without a prefix, or once it is cached, children go at once."""
        warming = await self._claim(prefix)
        if warming is None:
            return await start()
        assert prefix is not None
        warmed = False
        try:
            result = await start()
            with contextlib.suppress(Exception):  # a failure releases the others at once
                await asyncio.wait_for(started(result), self.wait_s)
            warmed = True
            return result
        finally:
            self._release(prefix.key, warming, warmed)

    async def _claim(self, prefix: SharedPrefix | None) -> asyncio.Event | None:
        """None when a child may go at once (no caching, the prefix is cached, another child
        warmed it while this one waited, or the children go on the batch tier: their requests
        share a provider batch, answered in one round, where a first child sent alone would
        cost the others a whole round); else this caller warms the prefix, and `_release`
        lets the others go."""
        if prefix is None or self.policy is None or prefix.choice.tier == "batch":
            return None
        key = prefix.key
        warming = self._warming.get(key)
        if warming is None and self._warm_until.get(key, 0.0) <= time.monotonic():
            warming = self._warming[key] = asyncio.Event()
            return warming
        if warming is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(warming.wait(), self.wait_s)
        self._keep_warm(key)
        return None

    def _release(self, key: tuple[Any, ...], warming: asyncio.Event, warmed: bool) -> None:
        if warmed:
            self._keep_warm(key)
        del self._warming[key]
        warming.set()

    async def begin_child(
        self, child: AgentRecord, begin: Callable[[], Awaitable[TurnTicket]]
    ) -> TurnTicket:
        """A forked child's first turn, by `begin()`, warm-started as `start_many` does: the
        `fork` tool forks one child a call, and a model often calls it several times at once."""
        prefix = None
        if self.policy is not None and child.parent_uuid is not None:
            tokens = self._tokens.count(self._core.store, child.parent_uuid)
            prefix = self.prefix(child, child.fork_message_id, tokens)

        async def started(turn: TurnTicket) -> object:
            host = self._core.live(child.uuid).host
            return await _started(host, turn.ticket.ticket_id, self.wait_s)

        return await self.warm_start(prefix, begin, started)

    def _keep_warm(self, key: tuple[Any, ...]) -> None:
        assert self.policy is not None
        self._warm_until[key] = time.monotonic() + self.policy.seconds * WARM_SHARE

    async def start_many(
        self,
        prefix: SharedPrefix | None,
        by_host: dict[str, list[tuple[Ticket, Activation]]],
        hosts: dict[str, HostAPI],
        shared: Any,
    ) -> Started:
        """Start forked children, one call per host (the first child alone first, when its
        prefix is cold); each call's outcome, an exception or None."""
        cached = await self._cached_content(prefix, by_host, hosts, shared)

        async def call(host_id: str, items: list[tuple[Ticket, Activation]]) -> None:
            await asyncio.wait_for(
                hosts[host_id].start_many(items, shared, cached), START_TIMEOUT_S
            )

        outcomes: Started = []
        calls = list(by_host.items())
        warming = None if cached is not None else await self._claim(prefix)
        if warming is not None:  # a cold prefix: its first child goes alone
            assert prefix is not None
            first_host, items = calls[0]
            first, calls[0] = items[:1], (first_host, items[1:])
            failed: BaseException | None = None
            try:
                await call(first_host, first)
            except Exception as exc:
                failed = exc
            else:
                with contextlib.suppress(Exception):
                    ticket = first[0][0].ticket_id
                    await _started(hosts[first_host], ticket, self.wait_s)
            finally:
                self._release(prefix.key, warming, failed is None)
            outcomes.append((first_host, first, failed))
        results = await asyncio.gather(
            *(call(host_id, items) for host_id, items in calls if items), return_exceptions=True
        )
        for (host_id, items), result in zip([c for c in calls if c[1]], results, strict=True):
            outcomes.append((host_id, items, result if isinstance(result, BaseException) else None))
        return outcomes

    async def _cached_content(
        self,
        prefix: SharedPrefix | None,
        by_host: dict[str, list[tuple[Ticket, Activation]]],
        hosts: dict[str, HostAPI],
        shared: Any,
    ) -> str | None:
        """The name of a Gemini `cachedContents` entry for `prefix`, made by the first child's
        host when there is none (or it is getting old); None for other providers, a model
        the catalog says takes none (Gemini 4 Argon: implicit caching only), one that refused
        one (told once, as an event), or no caching."""
        if prefix is None or self.policy is None or prefix.choice.provider != "google":
            return None
        choice = prefix.choice
        if (choice.provider, choice.model) in self._refused:
            return None
        if not model_info(choice.model, choice.provider).explicit_cache:
            return None
        made = self._made.get(prefix.key)
        if made is not None and made.renew_at > time.monotonic():
            return made.name
        host_id, items = next(iter(by_host.items()))
        activation = items[0][1]
        try:
            entry = await asyncio.wait_for(
                hosts[host_id].create_cache(activation, shared, self.policy.seconds),
                START_TIMEOUT_S,
            )
        except (GroveError, TimeoutError) as exc:
            self._refused.add((choice.provider, choice.model))
            self._core.event(
                "CacheFeatureDropped",
                provider=choice.provider,
                model=choice.model,
                feature="cachedContents",
                error=str(exc) or type(exc).__name__,
            )
            return None
        if made is not None:
            self._renewed.append(made)  # children may still name it: it goes at the end
        renew_at = time.monotonic() + self.policy.seconds * RENEW_SHARE
        self._made[prefix.key] = _Made(entry.name, prefix.parent, choice, hosts[host_id], renew_at)
        self._core.event(
            "CachedContentMade", parent=prefix.parent, name=entry.name, tokens=entry.tokens
        )
        return entry.name

    async def release(self, parent: str | None = None) -> int:
        """Delete the explicit entries made for forks of `parent` (every one: None); how many
        went. An entry that cannot be deleted expires at the end of its lifetime anyway."""
        gone = [made for made in self._renewed if parent in (None, made.parent)]
        gone += [
            self._made.pop(key)
            for key, made in list(self._made.items())
            if parent in (None, made.parent)
        ]
        self._renewed = [made for made in self._renewed if made not in gone]
        for made in gone:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(made.host.drop_cache(made.choice, made.name), 30.0)
            self._core.event("CachedContentDeleted", parent=made.parent, name=made.name)
        return len(gone)


def _started(host: HostAPI, ticket_id: str, wait_s: float) -> Awaitable[bool]:
    """`host.wait_started`: through a RayProxy, the call is given the `wait_s` it waits
    besides its own timeout (as the contract asks of its callers)."""
    call = host.wait_started(ticket_id, wait_s)
    if isinstance(call, RayCall):
        return call.within(wait_s + HOST_CALL_TIMEOUT_S)
    return call
