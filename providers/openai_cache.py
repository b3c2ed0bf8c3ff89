"""OpenAI's `prompt_cache_key`, named from a request's fork point so that siblings land on the
same cache, and spread over numbered keys as OpenAI's guidance on requests per key says.

OpenAI routes by prompt and key; past about 15 requests a minute on one combination the rest
overflow to other machines, cold. Each process (a host) has keys of its own, whose requests
it counts: an agent keeps its key while that key is under the rate, else takes the lowest
that is. A key no reply has begun on yet is cold: its first request goes alone and the others
wait for its reply to begin (bounded), as forks wait for their first child (fork_cache.py).
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

from providers.base import Request
from providers.cache_features import last_cache_point

REQUESTS_PER_KEY_MINUTE = 15
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

    def choose(self, base: str, kept: int | None) -> int:
        """The number of the key for one more request: `kept` (the agent's last) while it is
        under the rate, else the lowest one that is; the request is counted."""
        now = self._clock()
        number = kept if kept is not None and self._room(f"{base}-{kept}", now) else None
        if number is None:
            number = 0
            while not self._room(f"{base}-{number}", now):
                number += 1
        self._keys.setdefault(f"{base}-{number}", _Key()).recent.append(now)
        return number

    def _room(self, key: str, now: float) -> bool:
        state = self._keys.get(key)
        if state is None:
            return True
        recent = state.recent
        while recent and now - recent[0] >= WINDOW_S:
            recent.popleft()
        return len(recent) < REQUESTS_PER_KEY_MINUTE

    async def warm_up(self, key: str) -> bool:
        """Wait while another request warms `key`; True when this one is to warm it."""
        state = self._keys.setdefault(key, _Key())
        if state.warm:
            return False
        if state.warming is None:
            state.warming = asyncio.Event()
            return True
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(state.warming.wait(), WARM_WAIT_S)
        return False

    def warmed(self, key: str, began: bool) -> None:
        """The warming request's reply began (`began`), or it failed: the others go."""
        state = self._keys.setdefault(key, _Key())
        state.warm = state.warm or began
        if state.warming is not None:
            state.warming.set()
            state.warming = None


SPREAD = KeySpread()


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
        point = last_cache_point(request)
        if point is None:
            return None
        digest = hashlib.sha256(point.key.encode()).hexdigest()[:24]
        base = f"{KEY_PREFIX}{digest}-{self._spread.tag}"
        number = self._spread.choose(base, self._kept.get(base))
        self._kept[base] = number
        return f"{base}-{number}"

    async def admit(self, request: Request) -> None:
        """Choose the request's key, and wait while another request warms it."""
        key = self.key_for(request)
        self._admitted = (request, key)
        if key is not None and await self._spread.warm_up(key):
            self._warming = key

    def began(self, began: bool) -> None:
        """The request's reply began (or it ended without one): a key it warmed is ready."""
        if self._warming is not None:
            self._spread.warmed(self._warming, began)
            self._warming = None
