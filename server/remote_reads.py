"""`RemoteReads`: what `grove agents`, `history`, `events`, `usage` and `worktrees` read, asked of
a running service over HTTP; it answers as `supervisor.reads.StoreReads` does (`ReadsAPI`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from grove.server.service_link import ServiceLink


class RemoteReads:
    """The reads of the service `link` reaches (closing them closes it)."""

    def __init__(self, link: ServiceLink) -> None:
        self._link = link

    def __enter__(self) -> RemoteReads:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._link.close()

    def agents(self, include_ended: bool) -> dict[str, Any]:
        found: dict[str, Any] = self._link.json(
            "GET", "/api/agents", params={"include_ended": include_ended}
        )
        return found

    def history(self, agent: str) -> dict[str, Any]:
        found: dict[str, Any] = self._link.json("GET", f"/api/agents/{agent}/history")
        return found

    def events(self, after: int = 0, limit: int = 1000) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = self._link.json(
            "GET", "/api/events", params={"after": after, "limit": limit}
        )["events"]
        return found

    def follow_events(self, after: int, wait_s: float) -> Iterator[list[dict[str, Any]]]:
        """The events after `after` as they come (the service's event stream); an empty list
        at its keep-alives, as StoreReads gives one after `wait_s` without events."""
        stream = self._link.stream_events("GET", "/api/events/stream", params={"after": after})
        for event, data in stream:
            yield [] if event == "comment" else [json.loads(data)]

    def usage(self, agent: str | None, by: str) -> dict[str, Any]:
        params = {"by": by, **({"agent": agent} if agent else {})}
        found: dict[str, Any] = self._link.json("GET", "/api/usage", params=params)
        return found

    def trim_events(self) -> dict[str, Any]:
        found: dict[str, Any] = self._link.json("POST", "/api/events/trim")
        return found

    def worktrees(self, repository: str, prune: bool = False) -> list[dict[str, Any]]:
        body = {"repository": repository, "prune": prune}
        found: dict[str, Any] = self._link.json("POST", "/api/worktrees", body)
        rows: list[dict[str, Any]] = found["worktrees"]
        return rows
