"""`Coalescer`: calls to the supervisor that many agents of a host make at once travel together,
one Ray call per batch (a budget's holds and settlements, the fleet's admissions and releases).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

Item = TypeVar("Item")
Answer = TypeVar("Answer")


class Coalescer(Generic[Item, Answer]):
    """Items that arrive while a call is in flight go together in the next call; a lone item
    goes at once. `send` answers each item of a batch, in order; when the call itself fails,
    every caller of that batch gets its exception."""

    def __init__(self, send: Callable[[list[Item]], Awaitable[list[Answer]]], name: str) -> None:
        self._send = send
        self._name = name
        self._queue: list[tuple[Item, asyncio.Future[Answer]]] = []
        self._flusher: asyncio.Task[None] | None = None
        self.calls = 0  # for tests and diagnostics: how many calls carried the items

    def call(self, item: Item) -> asyncio.Future[Answer]:
        """The answer to `item`, to await (a caller that stops awaiting it leaves the others
        of its batch as they are)."""
        answer: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        self._queue.append((item, answer))
        if self._flusher is None:
            self._flusher = asyncio.create_task(self._flush(), name=self._name)
        return answer

    async def _flush(self) -> None:
        try:
            while self._queue:
                batch, self._queue = self._queue, []
                self.calls += 1
                try:
                    answers = await self._send([item for item, _ in batch])
                except Exception as exc:  # the call failed: each caller sees why
                    for _, waiting in batch:
                        if not waiting.done():
                            waiting.set_exception(exc)
                    continue
                for (_, waiting), answer in zip(batch, answers, strict=True):
                    if not waiting.done():
                        waiting.set_result(answer)
        finally:
            self._flusher = None
            for _, waiting in self._queue:  # only left here when this task was cancelled
                if not waiting.done():
                    waiting.cancel()
