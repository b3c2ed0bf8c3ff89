"""`StoreReads`: the read side of Grove straight from the store, no Ray and no supervisor: the
tree, a conversation, the event log, usage and worktrees as JSON-ready data, for `grove agents`,
`history`, `events`, `usage` and `worktrees` and for the HTTP API's answers (the same both ways).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from types import TracebackType
from typing import Any

from grove.supervisor.store import EventRecord, open_store
from grove.supervisor.tree_view import message_json, tree_rows
from grove.supervisor.usage import subtree, usage_report
from grove.supervisor.worktrees import worktree_rows


def event_json(event: EventRecord) -> dict[str, Any]:
    return event.model_dump()


DAY_S = 86_400


class StoreReads:
    """Reads of the store at `url`; opened here (a SQLite file in a directory that does not
    exist is an error, not a new store), closed by `close()` or a `with` block. `keep_days`:
    how much of the event log `trim_events` keeps ([events] keep_days)."""

    def __init__(self, url: str | None, *, keep_days: float = 7.0) -> None:
        self.store = open_store(url, make_directory=False)
        self.keep_days = keep_days

    def __enter__(self) -> StoreReads:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self.store.close()

    def agents(self, include_ended: bool) -> dict[str, Any]:
        """`{"agents": [row, ...], "trees": {...}, "unreadable": [...]}`, oldest first; ended
        agents only with `include_ended` (see supervisor/tree_view.py for a row)."""
        return tree_rows(self.store, include_ended)

    def history(self, agent: str) -> dict[str, Any]:
        """`{"agent": uuid, "messages": [...]}`: the agent's (a unique prefix will do) whole
        conversation, inherited messages and compactions in their place."""
        record = self.store.resolve_agent(agent)
        messages = self.store.conversation(record.uuid, compacted=False)
        return {"agent": record.uuid, "messages": [message_json(m) for m in messages]}

    def events(self, after: int = 0, limit: int = 1000) -> list[dict[str, Any]]:
        """The events with an id above `after`, oldest first, at most `limit`."""
        return [event_json(event) for event in self.store.events(after, limit)]

    def follow_events(self, after: int, wait_s: float) -> Iterator[list[dict[str, Any]]]:
        """The events after `after` as they come, a list at a time (empty after `wait_s`
        with none); for as long as the caller reads."""
        while True:
            found = self.store.wait_events(after, wait_s)
            after = found[-1].id if found else after
            yield [event_json(event) for event in found]

    def trim_events(self) -> dict[str, Any]:
        """Delete the events older than `keep_days`: `{"removed": how many, "keep_days": ...}`."""
        removed = self.store.trim_events(time.time() - self.keep_days * DAY_S)
        return {"removed": removed, "keep_days": self.keep_days}

    def usage(self, agent: str | None, by: str) -> dict[str, Any]:
        """Requests, tokens, cost and time of every agent (or of `agent` and those below it)
        grouped `by` agent, model, provider or day (supervisor/usage.py)."""
        store = self.store
        chosen = (
            subtree(store, store.resolve_agent(agent))
            if agent
            else store.list_agents(include_ended=True)
        )
        return usage_report(store, chosen, by).as_dict()

    def worktrees(self, repository: str, prune: bool = False) -> list[dict[str, Any]]:
        """Grove's worktrees of the git repository `repository` is in, with their agents
        (supervisor/worktrees.py); with `prune`, those of ended or merged agents go."""
        return [row.as_dict() for row in asyncio.run(worktree_rows(self.store, repository, prune))]
