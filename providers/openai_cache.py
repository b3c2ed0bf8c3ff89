"""OpenAI's `prompt_cache_key`, named from a request's fork point so that siblings land on the
same cache, and spread over numbered keys as OpenAI's guidance on requests per key says.

OpenAI routes by prefix and key; past about 15 requests a minute for one combination the
overflow goes to other machines, cold. A key's requests are counted per process (a host);
an agent keeps its key while that key is under the rate, then moves to the next one.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import deque
from collections.abc import Callable

from providers.base import Request
from providers.cache_features import last_cache_point

REQUESTS_PER_KEY_MINUTE = 15
WINDOW_S = 60.0
KEY_PREFIX = "grove-"
FEATURE = "prompt_cache_key"


class KeySpread:
    """Requests in the last minute by numbered key, for every agent of this process."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._recent: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def choose(self, base: str, kept: int | None) -> int:
        """The number of the key for one more request: `kept` (the agent's last) while it is
        under the rate, else the lowest one that is; the request is counted."""
        with self._lock:
            now = self._clock()
            number = kept if kept is not None and self._room(f"{base}-{kept}", now) else None
            if number is None:
                number = 0
                while not self._room(f"{base}-{number}", now):
                    number += 1
            self._recent.setdefault(f"{base}-{number}", deque()).append(now)
            return number

    def _room(self, key: str, now: float) -> bool:
        recent = self._recent.get(key)
        if recent is None:
            return True
        while recent and now - recent[0] >= WINDOW_S:
            recent.popleft()
        if not recent:
            del self._recent[key]
            return True
        return len(recent) < REQUESTS_PER_KEY_MINUTE


SPREAD = KeySpread()


class CacheKeys:
    """One agent's keys (a wire instance belongs to one agent's provider)."""

    def __init__(self, spread: KeySpread = SPREAD) -> None:
        self._spread = spread
        self._kept: dict[str, int] = {}

    def key_for(self, request: Request) -> str | None:
        """The `prompt_cache_key` of `request`: None without a fork point or caching."""
        point = last_cache_point(request)
        if point is None:
            return None
        base = KEY_PREFIX + hashlib.sha256(point.key.encode()).hexdigest()[:24]
        number = self._spread.choose(base, self._kept.get(base))
        self._kept[base] = number
        return f"{base}-{number}"
