"""Tests of cli/mcp_reach.py's pure parts: each agent's root (children, reviewers, parents
the rows leave out) and ids given in full or by a unique start."""

from __future__ import annotations

import pytest

from grove.cli.mcp_reach import Reach, one, tree_roots


def row(uuid: str, parent: str | None = None, watched: str | None = None) -> dict[str, str | None]:
    return {"uuid": uuid, "parent_uuid": parent, "watched_uuid": watched}


def test_every_agent_climbs_to_its_root() -> None:
    rows = [
        row("c2", parent="c1"),  # listed before its parent
        row("r1"),
        row("c1", parent="r1"),
        row("rev", watched="c2"),  # a reviewer counts in the tree it watches
        row("r2"),
        row("orphan", parent="gone"),  # a parent the rows leave out: the highest one known
    ]
    in_r1 = dict.fromkeys(["r1", "c1", "c2", "rev"], "r1")
    assert tree_roots(rows) == {**in_r1, "r2": "r2", "orphan": "gone", "gone": "gone"}


def test_a_deep_tree_is_climbed_without_recursion() -> None:
    rows = [row("a0"), *(row(f"a{n}", parent=f"a{n - 1}") for n in range(1, 5000))]
    assert set(tree_roots(rows[::-1]).values()) == {"a0"}


def test_an_id_is_given_whole_or_by_a_unique_start() -> None:
    uuids = ["abc1", "abc2", "abd3"]
    assert one("abc1", uuids, "x") == "abc1"
    assert one("abd", uuids, "x") == "abd3"
    with pytest.raises(ValueError, match=r"^'abc' starts the ids of 2 agents among the tests$"):
        one("abc", uuids, "the tests")
    for missing in ("zz", ""):
        with pytest.raises(ValueError, match=rf"^no agent {missing!r} among the tests$"):
            one(missing, uuids, "the tests")


def test_a_fork_may_not_loosen_what_the_servers_agents_may_do() -> None:
    def refusal(policy: dict[str, str], held: dict[str, str], allow: list[str]) -> str | None:
        return Reach(lambda ended: [], held, allow, ()).fork_refusal("p1", policy)

    assert refusal({"bash": "allow"}, {}, []) == (
        "fork refused: p1 may run bash without asking and this server's agents may not; to let "
        "them, start grove mcp with --allow bash"
    )
    assert refusal({"bash": "allow"}, {}, ["bash"]) is None
    assert refusal({"bash": "allow"}, {"bash": "allow"}, []) is None  # [tools.policy] grants it
    assert refusal({"bash": "allow", "write": "ask", "read": "allow"}, {"write": "deny"}, []) == (
        "fork refused: p1 may run bash without asking, write after asking and this server's "
        "agents may not; to let them, start grove mcp with --allow bash --allow write"
    )
    assert refusal({"bash": "ask", "write": "deny", "fork": "allow"}, {}, []) is None


def test_ids_made_or_forked_here_are_not_looked_for_again() -> None:
    rows = [row("r1"), row("c1", parent="r1"), row("x1")]
    reads: list[bool] = []

    def read(ended: bool) -> list[dict[str, str | None]]:
        reads.append(ended)
        return rows

    reach = Reach(read, {}, [], ())
    reach.made("r1")
    reach.forked(["c9"])
    assert reach.reachable(["r1", "c9"]) == ["r1", "c9"] and reads == []
    assert reach.reachable(["c1"]) == ["c1"] and reads == [True]  # made by an agent: read
    with pytest.raises(ValueError, match=r"^no agent 'x1' among the sessions of this server$"):
        reach.reachable(["x1"])
    assert [row["uuid"] for row in reach.agents()] == ["r1", "c1"]
