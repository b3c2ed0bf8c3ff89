"""`SharedPrefixes`: the conversation forked children inherit, put where every host can read
it once per fork point and kept for the next fork from the same point.

A batch refills its slots with many small `fork_many` calls from one parent at one point: they
share one object instead of putting (and each host fetching) the same conversation again.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from supervisor.context import message_tokens
from supervisor.store.records import MessageRecord

# Parents whose latest shared prefix is kept; the least recently forked one goes first.
KEPT_PARENTS = 64


class SharedPrefixes:
    """One shared prefix per parent (its newest fork point), for the last `capacity` parents."""

    def __init__(self, share: Callable[[list[MessageRecord]], Any], capacity: int = KEPT_PARENTS):
        self._share = share
        self._capacity = capacity
        self._kept: OrderedDict[str, tuple[int, Any, int]] = OrderedDict()

    def get(
        self, parent: str, fork_point: int, read: Callable[[], list[MessageRecord]]
    ) -> tuple[Any, int]:
        """The shared conversation of `parent` up to `fork_point`, and about how many tokens
        it takes in a request; `read()` gives it (the parent's whole conversation, read at
        that point) when it is not kept yet."""
        kept = self._kept.pop(parent, None)
        if kept is None or kept[0] != fork_point:
            records = read()
            tokens = sum(message_tokens(record) for record in records)
            kept = (fork_point, self._share(records), tokens)
        self._kept[parent] = kept
        if len(self._kept) > self._capacity:
            self._kept.popitem(last=False)
        return kept[1], kept[2]
