"""SharedPrefixes: one shared object per parent and fork point, re-read only when the point
moves, and no more parents kept than its capacity."""

from __future__ import annotations

from collections.abc import Callable

from grove.supervisor.prefixes import SharedPrefixes
from grove.supervisor.store.records import MessageRecord


def message(number: int) -> MessageRecord:
    return MessageRecord(
        id=number, agent_uuid="root", kind="user", content=f"m{number}", created_at=0.0
    )


def test_a_prefix_is_shared_once_per_parent_and_fork_point() -> None:
    shared: list[list[MessageRecord]] = []
    reads: list[str] = []

    def share(value: list[MessageRecord]) -> int:
        shared.append(value)
        return len(shared)  # stands for an object reference

    def reader(parent: str, upto: int) -> Callable[[], list[MessageRecord]]:
        def read() -> list[MessageRecord]:
            reads.append(parent)
            return [message(number) for number in range(1, upto + 1)]

        return read

    prefixes = SharedPrefixes(share, capacity=2)
    assert prefixes.get("root", 2, reader("root", 2))[0] == 1
    assert prefixes.get("root", 2, reader("root", 2))[0] == 1
    assert reads == ["root"]
    assert prefixes.get("root", 3, reader("root", 3))[0] == 2
    assert [m.id for m in shared[-1]] == [1, 2, 3]
    prefixes.get("a", 1, reader("a", 1))
    prefixes.get("root", 3, reader("root", 3))
    prefixes.get("b", 1, reader("b", 1))  # over capacity: "a", the least recent, goes
    assert prefixes.get("root", 3, reader("root", 3))[0] == 2
    assert prefixes.get("a", 1, reader("a", 1))[0] == 5
    assert reads == ["root", "root", "a", "b", "a"]


def test_a_prefix_comes_with_its_length_in_tokens() -> None:
    prefixes = SharedPrefixes(lambda value: value)
    long = MessageRecord(id=1, agent_uuid="root", kind="user", content="x" * 4_000, created_at=0)
    _, tokens = prefixes.get("root", 1, lambda: [long])
    assert 1_000 <= tokens <= 1_010
