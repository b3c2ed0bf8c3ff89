"""OpenAI's `prompt_cache_key`, named from a request's fork point so that siblings land on the
same cache, and spread over numbered keys as OpenAI's guidance on requests per key says.

OpenAI routes by prompt and key; past about 15 requests a minute on one combination the rest
overflow to other machines, cold. Each process (a host) has keys of its own, whose requests
it counts: an agent keeps its key while that key is under the rate, else takes the lowest
that is, opening the next key a little before (OPEN_NEXT_AT). A key no reply has begun on
yet is cold: one request warms it while the others keep to a warm key of the same prefix, or,
before there is one, wait for its reply to begin (bounded), as forks wait for their first
child (supervisor/fork_cache.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from grove.providers.base import Request
from grove.providers.cache_features import last_cache_point

REQUESTS_PER_KEY_MINUTE = LIMIT = 15
# Once a key has carried this many requests in the minute, the next request opens the next
# key (and warms it), so that it is warm by the time this one is full.
OPEN_NEXT_AT = 10
WINDOW_S = 60.0
KEY_PREFIX = "grove-"
FEATURE = "prompt_cache_key"
WARM_WAIT_S = 30.0


@dataclass(slots=True)
class _Key:
    recent: deque[float] = field(default_factory=deque)  # when its requests went
    warm: bool = False  # a reply began on it: OpenAI has its prompt cached
    warming: asyncio.Event | None = None  # its first request is out; the others wait


class KeySpread:
    """Every numbered key of this process: requests in the last minute, warm or not."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, tag: str = "") -> None:
        self._clock = clock
        self.tag = tag or f"{os.getpid():x}"  # this process's keys are its own
        self._keys: dict[str, _Key] = {}
        self._newest_warm: dict[str, int] = {}  # by prefix: its newest warm key's number

    def choose(self, base: str, kept: int | None) -> int:
        """The number of the key for one more request: `kept` (the agent's last) while it is
        under the rate, else the lowest one that is; or the next key, not yet used, once this
        one has carried OPEN_NEXT_AT requests (this request warms it). The request counts."""
        now = self._clock()
        number = kept if kept is not None and self._count(f"{base}-{kept}", now) < LIMIT else None
        if number is None:
            number = 0
            while self._count(f"{base}-{number}", now) >= LIMIT:
                number += 1
        following = f"{base}-{number + 1}"
        if self._count(f"{base}-{number}", now) >= OPEN_NEXT_AT and following not in self._keys:
            number += 1
        self._keys.setdefault(f"{base}-{number}", _Key()).recent.append(now)
        return number

    def _count(self, key: str, now: float) -> int:
        """The requests `key` carried in the last minute."""
        state = self._keys.get(key)
        if state is None:
            return 0
        recent = state.recent
        while recent and now - recent[0] >= WINDOW_S:
            recent.popleft()
        return len(recent)

    async def warm_up(self, base: str, number: int) -> tuple[str, bool]:
        """The key a request goes with, and whether it warms that key: its own when warm, or
        when nobody warms it yet (then this request does); while another request warms it,
        the newest warm key of the same prefix (a little over its rate rather than waiting),
        or, with none, that key once its warmer's reply began (bounded wait)."""
        key = f"{base}-{number}"
        state = self._keys.setdefault(key, _Key())
        if state.warm:
            return key, False
        if state.warming is None:
            state.warming = asyncio.Event()
            return key, True
        warm = self._newest_warm.get(base)
        if warm is not None:
            return f"{base}-{warm}", False
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(state.warming.wait(), WARM_WAIT_S)
        return key, False

    def warmed(self, key: str, began: bool) -> None:
        """The warming request's reply began (`began`), or it failed: the others go."""
        state = self._keys.setdefault(key, _Key())
        if began and not state.warm:
            state.warm = True
            base, _, number = key.rpartition("-")
            self._newest_warm[base] = max(int(number), self._newest_warm.get(base, 0))
        if state.warming is not None:
            state.warming.set()
            state.warming = None


SPREAD = KeySpread()


def prefix_key(request: Request) -> str | None:
    """The key named from `request`'s fork point (None without one, or without caching), with
    no process tag or number: what a batched request carries, whose pace is the batch's."""
    point = last_cache_point(request)
    if point is None:
        return None
    return KEY_PREFIX + hashlib.sha256(point.key.encode()).hexdigest()[:24]


class CacheKeys:
    """One agent's keys (a wire instance belongs to one agent's provider)."""

    def __init__(self, spread: KeySpread = SPREAD) -> None:
        self._spread = spread
        self._kept: dict[str, int] = {}
        self._admitted: tuple[Request, str | None] | None = None
        self._warming: str | None = None

    def key_for(self, request: Request) -> str | None:
        """The `prompt_cache_key` of `request` (None without a fork point or caching): the one
        `admit` chose for it, or one chosen now."""
        if self._admitted is not None and self._admitted[0] is request:
            return self._admitted[1]
        chosen = self._choose(request)
        return None if chosen is None else f"{chosen[0]}-{chosen[1]}"

    def _choose(self, request: Request) -> tuple[str, int] | None:
        prefix = prefix_key(request)
        if prefix is None:
            return None
        base = f"{prefix}-{self._spread.tag}"
        number = self._spread.choose(base, self._kept.get(base))
        self._kept[base] = number
        return base, number

    async def admit(self, request: Request) -> None:
        """Choose the request's key: a cold one is warmed by one request at a time."""
        chosen = self._choose(request)
        key = None
        if chosen is not None:
            key, warms = await self._spread.warm_up(*chosen)
            self._warming = key if warms else None
        self._admitted = (request, key)

    def began(self, began: bool) -> None:
        """The request's reply began (or it ended without one): a key it warmed is ready."""
        if self._warming is not None:
            self._spread.warmed(self._warming, began)
            self._warming = None
