"""`EventLog`: the supervisor's writer of the store's event log, one write per command.

Inside `batched()` (a command's dispatch, a host's report of finished turns) events wait in
order and go out in one store write when the block ends, or at the next loop step if the block
awaits something.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from contextvars import ContextVar
from typing import Any

from grove.supervisor.errors import StoreError
from grove.supervisor.store.base import Store

logger = logging.getLogger(__name__)

# True in the task running a batched command (and in tasks it starts).
_BATCHING: ContextVar[bool] = ContextVar("grove_event_batching", default=False)


class EventLog:
    """Appends events to one store in the order they were recorded, batching where it may."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._pending: list[tuple[str, dict[str, Any]]] = []

    def record(self, kind: str, payload: dict[str, Any]) -> None:
        """Append an event: now, or with the rest of the current batch (see the module)."""
        self._pending.append((kind, payload))
        if not _BATCHING.get():
            self.flush()
        elif len(self._pending) == 1:
            # The batch's first event: written at the next loop step at the latest, so a
            # command that waits (for a turn, a lease) shows in the log while it waits.
            # Without a running loop nothing can wait: the batch's end writes it.
            with suppress(RuntimeError):
                asyncio.get_running_loop().call_soon(self._flush_soon)

    def flush(self) -> None:
        """Write every waiting event in one store write."""
        pending, self._pending = self._pending, []
        if pending:
            self._store.log_events(pending)

    def _flush_soon(self) -> None:
        """The loop-step flush: nobody waits for it, so a store failure is logged here."""
        try:
            self.flush()
        except StoreError as exc:
            logger.warning("Events of a running command were not written: %s", exc)

    @contextmanager
    def batched(self) -> Iterator[None]:
        """Hold this task's events for one write when the block ends."""
        token = _BATCHING.set(True)
        try:
            yield
        finally:
            _BATCHING.reset(token)
            self.flush()
