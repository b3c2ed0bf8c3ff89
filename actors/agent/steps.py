"""Durable turns, the agent's side: a turn's finished steps stored as they end (`TurnSteps`),
which calls of a conversation started and never returned, and what the model is told of one
that may not run again. The turn loop (turn_loop.py) decides when; this module, how.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import replace

from grove.actors.errors import StepRefused
from grove.actors.turn_result import NewEntry, TurnResult
from grove.providers.base import Message, ToolCallPart, ToolResultPart

# Stores finished steps of a turn, `(index in the turn's entries, entry)` each, keyed by the
# turn's ticket and the index; the message id of each, or None when the supervisor refused
# them (the turn is no longer this agent's turn in flight).
StoreSteps = Callable[[list[tuple[int, NewEntry]]], Awaitable[list[int] | None]]
INTERRUPTED_FACT = "interrupted"
STORED = "message_id"  # in an entry's data: the message is in the store already


def open_calls(history: Sequence[Message]) -> list[ToolCallPart]:
    """The calls of the conversation's last reply that have no result yet: they started
    (the reply is stored before its calls run) and their turn stopped before they returned."""
    answered: set[str] = set()
    for message in reversed(history):
        if message.role == "user":
            results = [p.call_id for p in message.parts if isinstance(p, ToolResultPart)]
            if not results:
                return []
            answered.update(results)
            continue
        calls = [part for part in message.parts if isinstance(part, ToolCallPart)]
        return [call for call in calls if call.call_id not in answered]
    return []


def interrupted_text(name: str) -> str:
    """The result of a call cut off by its host's death that is not safe to run again."""
    return (
        f"The call to {name} was interrupted before it returned (the process running it "
        "stopped); it may or may not have taken effect. Check before calling it again."
    )


class TurnSteps:
    """One turn's entries stored as its steps end, in the turn's order, through `store` (None:
    this turn is not stored step by step)."""

    def __init__(self, store: StoreSteps | None) -> None:
        self._store = store
        self._storing: list[asyncio.Future[bool]] = []  # tool results being stored

    @property
    def storing(self) -> bool:
        """Whether this turn's steps are stored as they end (until a store fails)."""
        return self._store is not None

    async def store_reply(
        self, result: TurnResult, tell_bill: Callable[[], Awaitable[None]] | None
    ) -> None:
        """A reply that calls tools, stored with the turn's entries before it, before its
        calls run: a call of a stored reply counts as started. The stored step tells the
        supervisor what the reply was billed; when it is not stored, `tell_bill` does."""
        stored = False
        try:
            stored = await self.store(result, range(len(result.entries)))
        finally:
            if not stored and tell_bill is not None:
                await tell_bill()

    async def store(self, result: TurnResult, indices: Iterable[int]) -> bool:
        """Store these entries of the turn now, once the stores under way have ended (the
        store keeps the turn's order); whether they are all stored."""
        await self.stored_so_far()
        return await self._store_now(result, indices)

    def store_soon(self, result: TurnResult, index: int) -> None:
        """Begin storing an entry (a tool result) without waiting: the next request waits
        for it before it is sent, as do the next store and the turn's end."""
        if self._store is not None:
            self._storing.append(asyncio.ensure_future(self._store_now(result, (index,))))

    async def stored_so_far(self) -> None:
        """Wait for the stores under way (raising what one of them raised)."""
        storing, self._storing = self._storing, []
        if storing:
            await asyncio.gather(*storing)

    async def _store_now(self, result: TurnResult, indices: Iterable[int]) -> bool:
        """Store these entries of the turn, those not stored yet, and mark them stored (the
        turn's end does not store them again); whether they are all stored. When the call
        fails they stay unmarked and this turn stores nothing more as it goes (a later step
        stored before them would break the turn's order): its end stores the rest, in order,
        under the same keys."""
        if self._store is None:
            return False
        unsaved = [(i, result.entries[i]) for i in indices if STORED not in result.entries[i].data]
        if not unsaved:
            return True
        try:
            ids = await self._store(unsaved)
        except Exception:  # durability lost for the rest of this turn, not the turn
            self._store = None
            return False
        if ids is None:
            raise StepRefused("this run of the turn may store no more steps: another run has it")
        for (index, entry), message_id in zip(unsaved, ids, strict=True):
            result.entries[index] = replace(entry, data={**entry.data, STORED: message_id})
        return True
