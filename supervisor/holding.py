"""Which trees this Grove holds: its name among the store's holders, kept alive while it runs,
and the trees it took, so that every view shows their agents `running` (the others `stopped`).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any

from grove.supervisor.store.base import Store
from grove.supervisor.store.records import AgentRecord
from grove.supervisor.usage import root_of_each

# A holder not renewed for this long is gone (its Grove was killed), and its trees stop.
HOLDER_TTL_S = 10.0
HOLDER_RENEW_S = 2.0


def new_holder() -> str:
    return f"grove-{secrets.token_hex(8)}"


def shown_status(status: str, held: bool) -> str:
    """An agent's status as every view shows it: a running agent whose tree no live Grove
    holds (`held`) is `stopped`."""
    return "stopped" if status == "running" and not held else status


def unheld_agents(store: Store, holder: str) -> list[AgentRecord]:
    """The running agents (reviewers too) whose tree no live Grove but `holder` holds: what
    `holder`'s supervisor, restarted, takes up again (another Grove runs its own trees' turns
    and reviewers; `holder`'s own holds may have lapsed while Ray restarted it)."""
    every = store.list_agents(include_ended=True)
    tops = root_of_each(every)
    others = {root for root, by in store.tree_holders().items() if by != holder}
    return [r for r in every if r.status == "running" and tops[r.uuid] not in others]


class TreeHolding:
    """The trees one Grove (`holder`) holds in `store`; `event` records an event."""

    def __init__(self, store: Store, holder: str, event: Callable[..., Any]) -> None:
        self.store = store
        self.holder = holder
        self.event = event
        self.held: set[str] = set()  # the roots of the trees held
        self._roots: dict[str, str] = {}  # agent uuid -> the root of its tree, as found

    def holds(self, uuid: str) -> bool:
        """Whether the tree of `uuid`, as found before, is held: `hold` would do nothing."""
        return self._roots.get(uuid) in self.held

    def renew(self) -> None:
        """Tell the store this Grove lives on; when it had been taken for gone (a renewal came
        too late), its trees are held again."""
        if not self.store.renew_holder(self.holder, HOLDER_TTL_S) and self.held:
            self.store.hold_trees(self.holder, sorted(self.held))

    def let_go(self) -> None:
        """This Grove ends: it holds no tree any more."""
        self.store.drop_holder(self.holder)
        self.held.clear()

    def hold(self, record: AgentRecord) -> None:
        """Hold the agent's tree from now on; the first time, the store and the event log
        (TreeHeld, naming the root) say so."""
        root = self.tree_root(record)
        if root not in self.held:
            self.store.hold_trees(self.holder, [root])
            self.held.add(root)
            self.event("TreeHeld", agent=root, holder=self.holder)

    def tree_root(self, record: AgentRecord) -> str:
        """The root of the agent's tree (a reviewer's is that of the agent it watches): read
        up from the store until an agent whose root is known (a forked child: its parent)."""
        walked: list[str] = []
        uuid = record.uuid
        current: AgentRecord | None = record
        while uuid not in self._roots and current is not None and uuid not in walked:
            walked.append(uuid)
            above = current.parent_uuid or current.watched_uuid
            if above is None:
                break
            uuid = above
            current = None if above in self._roots else self.store.get_agent(above)
        root = self._roots.get(uuid, walked[-1] if walked else uuid)
        self._roots.update(dict.fromkeys(walked, root))
        return root
