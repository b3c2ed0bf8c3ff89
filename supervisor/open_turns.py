"""`OpenTurns`: which agents are in a turn, and which of those wait on a provider batch, as the
event log tells (the dashboard's tree, supervisor/tree_view.py, follows it).
"""

from __future__ import annotations

from collections.abc import Callable

from grove.supervisor.store import AgentRecord, EventRecord

TURN_ENDS = frozenset({"TurnCompleted", "TurnInterrupted"})
# A step joined a provider batch; its answer came (supervisor/tiers/collector.py).
BATCH_WAITS = ("BatchWaiting", "BatchAnswered")
# A parent's children, those created since a time if one is given (Store.children).
Children = Callable[[str, float | None], list[AgentRecord]]


class OpenTurns:
    """The agents in a turn, as the event log tells: from TurnStarted, or from the AgentsForked
    that made them, to TurnCompleted or TurnInterrupted; `open` maps each to the id of the
    event that began its turn. `batched`: those whose step waits on a provider batch, from
    BatchWaiting to its BatchAnswered (or their turn's end)."""

    def __init__(self) -> None:
        self.open: dict[str, int] = {}
        self.batched: set[str] = set()
        self._seen: set[str] = set()  # agents whose turn began or ended in an event taken in

    def follow(self, event: EventRecord, children: Children) -> list[str]:
        """Take `event` in; the agents whose turn it began or ended, or whose step began or
        ended waiting on a batch."""
        agent = event.payload.get("agent")
        if event.kind in BATCH_WAITS and isinstance(agent, str):
            if event.kind == "BatchWaiting":
                self.batched.add(agent)
            else:
                self.batched.discard(agent)
            return [agent]
        if event.kind in ("TurnStarted", *TURN_ENDS) and isinstance(agent, str):
            if event.kind == "TurnStarted":
                self.open[agent] = event.id
            else:
                self.open.pop(agent, None)
            self.batched.discard(agent)
            self._seen.add(agent)
            return [agent]
        if event.kind == "AgentsForked":
            made = [child.uuid for child in forked(event, children) if child.uuid not in self._seen]
            self.open.update(dict.fromkeys(made, event.id))  # not those whose turn ended before
            self._seen.update(made)
            return made
        return []


def forked(event: EventRecord, children: Children) -> list[AgentRecord]:
    """The children an AgentsForked `event` made: the newest `count` of its parent's, asked
    for by the time they were made (`at`) where the event says it."""
    parent, count, at = (event.payload.get(key) for key in ("parent", "count", "at"))
    if not isinstance(parent, str) or not isinstance(count, int):
        return []
    since = float(at) if isinstance(at, int | float) else None
    newest = sorted(children(parent, since), key=lambda child: (child.created_at, child.uuid))
    return newest[max(0, len(newest) - count) :]
