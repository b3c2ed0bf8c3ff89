"""Gemini's explicit cache as the simulator keeps it: `cachedContents` create, get, update
(ttl), delete, and the entries that generateContent requests reference by name.

Entries hold contents, a system instruction and tools; one below the model's minimum is
refused, as an expired or deleted one is when named. No network I/O here (simulator/server.py).
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from grove.simulator.caching import min_tokens
from grove.simulator.script import estimate_tokens
from grove.simulator.wire import (
    InvalidRequest,
    Problem,
    Reply,
    SimulatedAPI,
    objects,
    random_id,
)

_PATH = re.compile(r"/v1(?:beta)?/cachedContents(?:/(?P<id>[A-Za-z0-9_-]+))?")
_TTL = re.compile(r"([0-9]{1,9})(?:\.[0-9]{1,9})?s")
DEFAULT_TTL_S = 3600.0
MAX_TTL_S = 7 * 86_400.0
GONE = "CachedContent not found (or permission denied)"


@dataclass(slots=True)
class CachedEntry:
    name: str
    model: str  # `models/...`
    contents: list[dict[str, Any]]
    system: Any
    tools: list[dict[str, Any]]
    tokens: int
    created: datetime
    expires: datetime
    display_name: str | None = None
    updated: datetime = field(default_factory=lambda: datetime.now(UTC))

    def as_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "name": self.name,
            "model": self.model,
            "createTime": _time(self.created),
            "updateTime": _time(self.updated),
            "expireTime": _time(self.expires),
            "usageMetadata": {"totalTokenCount": self.tokens},
        }
        if self.display_name:
            data["displayName"] = self.display_name
        return data


class ExplicitCaches:
    """The `cachedContents` of one simulator, its errors in `errors`' (Gemini's) form.
    `ttl_scale` shortens every lifetime; with `refuse` no model has explicit caching."""

    def __init__(
        self, errors: SimulatedAPI, *, ttl_scale: float = 1.0, refuse: bool = False
    ) -> None:
        self._errors = errors
        self.ttl_scale = ttl_scale
        self.refuse = refuse
        self._entries: dict[str, CachedEntry] = {}
        self._lock = threading.Lock()
        self.created = 0
        self.deleted = 0

    @property
    def live(self) -> int:
        now = datetime.now(UTC)
        return sum(entry.expires > now for entry in self._entries.values())

    def handles(self, path: str) -> bool:
        return _PATH.fullmatch(path) is not None

    def find(self, name: object) -> CachedEntry:
        """The live entry a generateContent request names; InvalidRequest when there is none."""
        with self._lock:
            entry = self._entries.get(name) if isinstance(name, str) else None
            if entry is None or entry.expires <= datetime.now(UTC):
                raise InvalidRequest(GONE)
            return entry

    def answer(self, method: str, path: str, body: dict[str, Any] | None) -> Reply:
        match = _PATH.fullmatch(path)
        assert match is not None, "the server routes only handled paths here"
        try:
            if match["id"] is None:
                if method != "POST":
                    return self._errors.error("method_not_allowed")
                return self._create(body or {})
            name = f"cachedContents/{match['id']}"
            if method == "GET":
                return Reply(status=200, body=self._live(name).as_json())
            if method == "PATCH":
                return self._update(name, body or {})
            if method == "DELETE":
                with self._lock:
                    self._live(name)
                    del self._entries[name]
                    self.deleted += 1
                return Reply(status=200, body={})
            return self._errors.error("method_not_allowed")
        except InvalidRequest as exc:
            problem: Problem = "missing_key" if exc.message == GONE else "invalid_request"
            return self._errors.error(problem, exc.message)

    def _live(self, name: str) -> CachedEntry:
        entry = self._entries.get(name)
        if entry is None or entry.expires <= datetime.now(UTC):
            raise InvalidRequest(GONE)
        return entry

    def _create(self, body: dict[str, Any]) -> Reply:
        model = body.get("model")
        if not isinstance(model, str) or not model:
            raise InvalidRequest("* CreateCachedContentRequest.cached_content.model: required")
        model = model if model.startswith("models/") else f"models/{model}"
        if self.refuse:
            return self._errors.error(
                "not_found",
                f"{model} is not found for API version v1beta, or is not supported for "
                "createCachedContent. Call ListModels to see the list of available models and "
                "their supported methods.",
            )
        contents = objects(body.get("contents"), "contents")
        system = body.get("systemInstruction", body.get("system_instruction"))
        tools = objects(body.get("tools"), "tools")
        tokens = estimate_tokens([system, contents, tools], "google")
        minimum = min_tokens(model.removeprefix("models/"))
        if tokens < minimum:
            raise InvalidRequest(
                f"Cached content is too small. total_token_count={tokens}, "
                f"min_total_token_count={minimum}"
            )
        now = datetime.now(UTC)
        entry = CachedEntry(
            name=f"cachedContents/{random_id('', 12, 'abcdefghijklmnopqrstuvwxyz0123456789')}",
            model=model,
            contents=contents,
            system=system,
            tools=tools,
            tokens=tokens,
            created=now,
            expires=now + self._lifetime(body),
            display_name=_text(body.get("displayName")),
        )
        with self._lock:
            self._entries[entry.name] = entry
            self.created += 1
        return Reply(status=200, body=entry.as_json())

    def _update(self, name: str, body: dict[str, Any]) -> Reply:
        with self._lock:
            entry = self._live(name)
            entry.updated = datetime.now(UTC)
            entry.expires = entry.updated + self._lifetime(body)
            return Reply(status=200, body=entry.as_json())

    def _lifetime(self, body: dict[str, Any]) -> timedelta:
        """`ttl` ("300s") or `expireTime` (RFC 3339), scaled; an hour by default."""
        ttl, expire = body.get("ttl"), body.get("expireTime")
        seconds = DEFAULT_TTL_S
        if ttl is not None:
            match = _TTL.fullmatch(ttl) if isinstance(ttl, str) else None
            if match is None:
                raise InvalidRequest(f"Invalid value at 'cached_content.ttl' ({ttl!r})")
            seconds = min(float(ttl[:-1]), MAX_TTL_S)
        elif isinstance(expire, str):
            try:
                when = datetime.fromisoformat(expire.replace("Z", "+00:00"))
            except ValueError as exc:
                raise InvalidRequest("Invalid value at 'cached_content.expire_time'") from exc
            seconds = max((when - datetime.now(UTC)).total_seconds(), 0.0)
        return timedelta(seconds=seconds * self.ttl_scale)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _time(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
