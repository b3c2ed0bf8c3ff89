"""What a client of `grove mcp` reaches: the sessions (trees) the server made and those the user
gave it with --session, and forks with no approvals beyond the server's own.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

Rows = Callable[[bool], list[dict[str, Any]]]  # every agent's row (`grove agents`), ended too?
LOOSENESS = {"deny": 0, "ask": 1, "allow": 2}
POLICY_WORDS = {"allow": "without asking", "ask": "after asking"}
AMONG_SESSIONS = "the sessions of this server"


class Reach:
    """The sessions a client may see and drive, and the tool policy the server's own agents
    have: `[tools.policy]` with `allow` over it. Which agents the sessions hold is read from
    the rows of the store (agents fork agents), and kept: an agent never changes tree, so an id
    found once (or made here) is not looked for again."""

    def __init__(
        self, rows: Rows, policy: Mapping[str, str], allow: Sequence[str], granted: Sequence[str]
    ) -> None:
        self._rows = rows
        self.held = {**policy, **dict.fromkeys(allow, "allow")}
        self._lock = threading.Lock()
        self._sessions: set[str] = set()
        self._reached: set[str] = set()
        if granted:  # ValueError for one not in the store
            roots = tree_roots(rows(True))
            self._sessions.update(roots[one(name, roots, "the stored agents")] for name in granted)

    def made(self, root: str) -> None:
        """A root this server made: its tree is one of the sessions."""
        with self._lock:
            self._sessions.add(root)
            self._reached.add(root)

    def forked(self, children: Sequence[str]) -> None:
        with self._lock:
            self._reached.update(children)

    def reached(self) -> set[str]:
        """The uuids of every agent of the sessions, ended ones too, read again."""
        with self._lock:
            sessions = frozenset(self._sessions)
        found = {uuid for uuid, root in tree_roots(self._rows(True)).items() if root in sessions}
        with self._lock:
            self._reached.update(found)
        return found

    def agents(self) -> list[dict[str, Any]]:
        """The rows of the sessions' agents that have not ended, oldest first."""
        reached = self.reached()
        return [row for row in self._rows(False) if row["uuid"] in reached]

    def reachable(self, given: Sequence[str]) -> list[str]:
        """The uuids of the agents `given` (ids or unique starts of them); ValueError naming one
        that is not in the sessions, the same whether or not another session has it."""
        with self._lock:
            known = set(self._reached)
        if not all(name in known for name in given):
            known = self.reached()
        return [one(name, known, AMONG_SESSIONS) for name in given]

    def fork_refusal(self, parent: str, policy: Mapping[str, str]) -> str | None:
        """Why a fork of `parent`, whose tools have `policy`, would give its children more than
        the server's agents may do (None: it would not)."""
        from grove.supervisor.tool_rules import policy_for

        looser = {
            name: chosen
            for name, chosen in policy.items()
            if LOOSENESS[chosen] > LOOSENESS[policy_for(name, self.held)]
        }
        if not looser:
            return None
        runs = ", ".join(f"{name} {POLICY_WORDS[chosen]}" for name, chosen in looser.items())
        flags = " ".join(f"--allow {name}" for name in looser)
        return (
            f"fork refused: {parent} may run {runs} and this server's agents may not; "
            f"to let them, start grove mcp with {flags}"
        )


def tree_roots(rows: list[dict[str, Any]]) -> dict[str, str]:
    """Each agent's root, by uuid: up its parents (a reviewer: the agent it watches)."""
    above = {row["uuid"]: row.get("parent_uuid") or row.get("watched_uuid") for row in rows}
    roots: dict[str, str] = {}
    for uuid in above:
        climbed = [uuid]
        while climbed[-1] not in roots and above.get(climbed[-1]):
            climbed.append(above[climbed[-1]])
        root = roots.get(climbed[-1], climbed[-1])
        roots.update(dict.fromkeys(climbed, root))
    return roots


def one(given: str, uuids: Collection[str], among: str) -> str:
    """The uuid of `uuids` that is `given` or the only one starting with it; ValueError when
    none or several do."""
    if given in uuids:
        return given
    found = [uuid for uuid in uuids if given and uuid.startswith(given)]
    if not found:
        raise ValueError(f"no agent {given!r} among {among}")
    if len(found) > 1:
        raise ValueError(f"{given!r} starts the ids of {len(found)} agents among {among}")
    return found[0]
