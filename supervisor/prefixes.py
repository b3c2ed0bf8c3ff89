"""`SharedPrefixes`: the conversation forked children inherit, put where every host can read
it once per fork point and kept for the next fork from the same point; `ConversationTokens`:
about how long that conversation is, kept up to date from the messages stored since.

A batch refills its slots with many small `fork_many` calls from one parent at one point: they
share one object instead of putting (and each host fetching) the same conversation again.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from grove.supervisor.context import message_tokens
from grove.supervisor.store.base import CLEAR_KIND, COMPACTION_KIND, Store
from grove.supervisor.store.records import MessageRecord

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


class ConversationTokens:
    """About how many tokens each agent's conversation takes in a request, for the last
    `capacity` agents asked about: read whole once, then brought up to date by reading only
    the agent's messages stored since (read whole again after a `clear` or a compaction,
    which change what the conversation holds)."""

    def __init__(self, capacity: int = KEPT_PARENTS) -> None:
        self._capacity = capacity
        self._kept: OrderedDict[str, tuple[int, int]] = OrderedDict()  # newest own id, tokens

    def count(self, store: Store, uuid: str) -> int:
        """`sum(message_tokens(m) for m in store.conversation(uuid))`, without reading the
        whole conversation again when it was counted before."""
        kept = self._kept.pop(uuid, None)
        if kept is not None:
            newest, tokens = kept
            added = store.agent_messages(uuid, after_id=newest)
            if any(message.kind in (CLEAR_KIND, COMPACTION_KIND) for message in added):
                kept = None
            elif added:
                kept = (added[-1].id, tokens + sum(message_tokens(m) for m in added))
        if kept is None:
            tokens = sum(message_tokens(message) for message in store.conversation(uuid))
            last = store.newest_messages(uuid, 1)
            kept = (last[0].id if last else 0, tokens)
        self._kept[uuid] = kept
        if len(self._kept) > self._capacity:
            self._kept.popitem(last=False)
        return kept[1]
