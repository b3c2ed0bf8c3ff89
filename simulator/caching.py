"""How the simulator's providers cache prompts and bill it: Anthropic's breakpoints (entries
at marked blocks, a 20-block look-back, per-model minimums, TTLs refreshed on each read) and
OpenAI's and Gemini's automatic prefix caching (from the model's minimum, in 128-token steps,
OpenAI routing by prompt and `prompt_cache_key` with overflow past about 15 requests a minute).

Vendor-neutral: the wire modules describe a prompt as `PromptPrefixes`; an entry written by a
request is readable once that request's response has started (its first token is due).
"""

from __future__ import annotations

import hashlib
import json
import random
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from grove.providers.catalog import model_info
from grove.providers.errors import GroveError

CHARS_PER_TOKEN = 4
STEP_TOKENS = 128  # OpenAI and Gemini cache prefixes in steps of this many tokens
LOOKBACK_BLOCKS = 20
DEFAULT_MIN_TOKENS = 1024
AUTOMATIC_TTL_S = 300.0  # OpenAI's in-memory retention, Gemini's implicit caching
TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}
# OpenAI: routes per prompt start and key; past this many requests a minute on one route the
# rest overflow to other machines, whose caches are their own.
ROUTE_REQUESTS_PER_MINUTE = 15
ROUTE_WINDOW_S = 60.0
MACHINES = 8
ROUTE_TOKENS = 256


@dataclass(frozen=True, kw_only=True, slots=True)
class Breakpoint:
    """A `cache_control` mark: after the prompt's point `index`, kept for `ttl` ("5m"/"1h")."""

    index: int
    ttl: str = "5m"


@dataclass(frozen=True, kw_only=True, slots=True)
class PromptPrefixes:
    """A prompt as its cache sees it: `points` are (tokens so far, digest of the prompt so
    far) in order (each block end for Anthropic, each 128-token step for the others);
    `breakpoints` Anthropic's marks; `route` OpenAI's routing key; `explicit` the tokens a
    referenced Gemini `cachedContents` entry supplies."""

    points: tuple[tuple[int, bytes], ...] = ()
    breakpoints: tuple[Breakpoint, ...] = ()
    route: str | None = None
    explicit: int = 0


@dataclass(frozen=True, kw_only=True, slots=True)
class CacheUse:
    """What one request read from caches and wrote to them, in tokens."""

    read: int = 0
    written: int = 0
    written_1h: int = 0


@dataclass(slots=True)
class _Entry:
    ready_at: float
    expires_at: float
    ttl_s: float


@dataclass(slots=True)
class _Store:
    """Entries by prefix digest."""

    entries: dict[bytes, _Entry] = field(default_factory=dict)

    def find(self, digest: bytes, now: float, refresh_s: float | None = None) -> bool:
        entry = self.entries.get(digest)
        if entry is None or entry.ready_at > now:
            return False
        if entry.expires_at <= now:
            del self.entries[digest]
            return False
        entry.expires_at = now + (entry.ttl_s if refresh_s is None else refresh_s)
        return True

    def put(self, digest: bytes, ready_at: float, ttl_s: float) -> None:
        entry = self.entries.get(digest)
        if entry is not None and entry.ready_at <= ready_at:
            entry.expires_at = max(entry.expires_at, ready_at + ttl_s)
            entry.ttl_s = max(entry.ttl_s, ttl_s)
            return
        self.entries[digest] = _Entry(ready_at, ready_at + ttl_s, ttl_s)

    def sweep(self, now: float) -> None:
        for digest in [d for d, entry in self.entries.items() if entry.expires_at <= now]:
            del self.entries[digest]


class CacheBook:
    """Every simulated provider cache of one simulator. `ttl_scale` shortens (or stretches)
    every lifetime, so a test can see entries expire."""

    def __init__(self, ttl_scale: float = 1.0) -> None:
        self.ttl_scale = ttl_scale
        self._breakpoints = _Store()
        self._machines: dict[str, list[_Store]] = {}
        self._routes: dict[str, deque[float]] = {}
        self._lock = threading.Lock()
        self._billed = 0

    def bill(
        self,
        api: str,
        model: str,
        prompt: PromptPrefixes,
        now: float,
        ready_at: float | Callable[[int], float],
    ) -> CacheUse:
        """Read and write `prompt`'s prefixes; what the request is billed for. What it writes
        is readable from `ready_at`: a time, or one made from the tokens it read (a reply
        begins sooner when less of its prompt is to be processed)."""
        ready = ready_at if callable(ready_at) else lambda read: float(ready_at)
        with self._lock:
            self._billed += 1
            if self._billed % 1000 == 0:
                self._sweep(now)
            if prompt.breakpoints:
                return self._breakpoint_use(prompt, min_tokens(model), now, ready)
            if prompt.explicit:
                return CacheUse(read=prompt.explicit)
            if prompt.route is not None or api == "google":
                return self._prefix_use(api, prompt, min_tokens(model), now, ready)
            return CacheUse()

    def _breakpoint_use(
        self, prompt: PromptPrefixes, minimum: int, now: float, ready: Callable[[int], float]
    ) -> CacheUse:
        """Anthropic: the longest entry found at a breakpoint or up to 20 blocks before one
        is read; from there to the last breakpoint that reaches the minimum is written, an
        entry made at each such breakpoint."""
        points, store = prompt.points, self._breakpoints
        read = 0
        for mark in prompt.breakpoints:
            for index in range(mark.index, max(mark.index - LOOKBACK_BLOCKS, -1), -1):
                tokens, digest = points[index]
                if tokens <= read:
                    break
                ttl_s = TTL_SECONDS[mark.ttl] * self.ttl_scale
                if tokens >= minimum and store.find(digest, now, ttl_s):
                    read = tokens
                    break
        written = written_1h = 0
        covered = read
        ready_at = ready(read)
        for mark in sorted(prompt.breakpoints, key=lambda mark: mark.index):
            tokens, digest = points[mark.index]
            if tokens < minimum:
                continue
            store.put(digest, ready_at, TTL_SECONDS[mark.ttl] * self.ttl_scale)
            if tokens > covered:
                if mark.ttl == "1h":
                    written_1h += tokens - covered
                written += tokens - covered
                covered = tokens
        return CacheUse(read=read, written=written, written_1h=written_1h)

    def _prefix_use(
        self,
        api: str,
        prompt: PromptPrefixes,
        minimum: int,
        now: float,
        ready: Callable[[int], float],
    ) -> CacheUse:
        """OpenAI and Gemini: the longest cached step of the prompt is read (none below the
        minimum); every step is kept, on the machine the request was routed to."""
        store = self._machine(api, prompt.route, now)
        ttl_s = AUTOMATIC_TTL_S * self.ttl_scale
        read = 0
        for tokens, digest in reversed(prompt.points):
            if tokens < minimum:
                break
            if store.find(digest, now, ttl_s):
                read = tokens
                break
        ready_at = ready(read)
        for tokens, digest in prompt.points:
            if tokens >= minimum:
                store.put(digest, ready_at, ttl_s)
        return CacheUse(read=read)

    def _machine(self, api: str, route: str | None, now: float) -> _Store:
        machines = self._machines.setdefault(api, [_Store() for _ in range(MACHINES)])
        if route is None:
            return machines[0]
        home = int.from_bytes(hashlib.blake2b(route.encode(), digest_size=4).digest(), "big")
        recent = self._routes.setdefault(route, deque())
        while recent and now - recent[0] >= ROUTE_WINDOW_S:
            recent.popleft()
        recent.append(now)
        if len(recent) > ROUTE_REQUESTS_PER_MINUTE:  # overflow: another machine, at random
            return machines[(home + random.randrange(1, MACHINES)) % MACHINES]
        return machines[home % MACHINES]

    def _sweep(self, now: float) -> None:
        self._breakpoints.sweep(now)
        for machines in self._machines.values():
            for store in machines:
                store.sweep(now)
        for route in [r for r, recent in self._routes.items() if not recent]:
            del self._routes[route]


def min_tokens(model: str) -> int:
    """The model's minimum cacheable length, from the catalog (unknown models: 1,024)."""
    try:
        return model_info(model).cache_min_tokens
    except GroveError:
        return DEFAULT_MIN_TOKENS


def block_points(blocks: Iterable[tuple[str, Any]]) -> tuple[tuple[int, bytes], ...]:
    """(tokens so far, digest so far) after each `(role, block)`: a block is its JSON without
    `cache_control`, which does not change what is cached."""
    digest = hashlib.blake2b(digest_size=16)
    chars = 0
    points: list[tuple[int, bytes]] = []
    for role, block in blocks:
        plain = _without_cache_control(block)
        digest.update(role.encode() + b"\x00" + _canonical(plain) + b"\x01")
        chars += _chars(plain)
        points.append((chars // CHARS_PER_TOKEN, digest.copy().digest()))
    return tuple(points)


def step_points(texts: Iterable[tuple[str, str]]) -> tuple[tuple[int, bytes], ...]:
    """(tokens, digest of the prompt up to there) at every 128-token step of a prompt given
    as `(where, text)` strings in order: where a string sits is part of what is hashed."""
    digest = hashlib.blake2b(digest_size=16)
    step = STEP_TOKENS * CHARS_PER_TOKEN
    chars = 0
    points: list[tuple[int, bytes]] = []
    for where, text in texts:
        digest.update(where.encode() + b"\x00")
        start = 0
        while chars + len(text) - start >= (len(points) + 1) * step:
            cut = start + (len(points) + 1) * step - chars
            digest.update(text[start:cut].encode("utf-8", "surrogatepass"))
            chars += cut - start
            start = cut
            points.append((chars // CHARS_PER_TOKEN, digest.copy().digest()))
        digest.update(text[start:].encode("utf-8", "surrogatepass") + b"\x01")
        chars += len(text) - start
    return tuple(points)


def route_of(key: str | None, points: tuple[tuple[int, bytes], ...], whole: bytes) -> str:
    """OpenAI's routing key: the prompt's first 256 tokens (or all of a shorter one) and the
    `prompt_cache_key`, if any."""
    start = next((digest for tokens, digest in points if tokens >= ROUTE_TOKENS), whole)
    return f"{key or ''}:{start.hex()}"


def strings(value: Any, where: str = "") -> Iterator[tuple[str, str]]:
    """Every string in `value`, in document order, with the path it sits at."""
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from strings(item, f"{where}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from strings(item, f"{where}[{index}]")


def whole_digest(value: Any) -> bytes:
    return hashlib.blake2b(_canonical(value), digest_size=16).digest()


def _without_cache_control(block: Any) -> Any:
    if isinstance(block, dict) and "cache_control" in block:
        return {key: value for key, value in block.items() if key != "cache_control"}
    return block


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode(
        "utf-8", "surrogatepass"
    )


def _chars(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return sum(_chars(item) for item in value.values())
    if isinstance(value, list):
        return sum(_chars(item) for item in value)
    return 0
