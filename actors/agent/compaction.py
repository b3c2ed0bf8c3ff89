"""An agent's context recovery: when its context passes `[compaction] threshold` of its model's
window, and what its conversation is after the supervisor compacted it (or why it could not).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from grove.actors.agent.choice import ModelChoice
from grove.actors.agent.steps import STORED
from grove.actors.agent.tool import Emit
from grove.actors.errors import ContextRecoveryError
from grove.actors.transcript import to_messages
from grove.actors.turn_result import TurnResult
from grove.providers.base import Message
from grove.providers.catalog import model_info
from grove.providers.errors import GroveError, ProviderError
from grove.providers.stream_events import ProviderWarning

# Asks the supervisor to compact an agent's context (`overflow`, `incomplete` or `threshold`,
# with the context tokens the host measured); the compacted conversation, or None if declined.
Recover = Callable[[str, str, int], Awaitable["list[Any] | None"]]


class ContextRecovery:
    """One agent's way to a smaller context: `recover` (None: it has none), past `threshold`
    (None: only when a request overflows)."""

    def __init__(self, uuid: str, recover: Recover | None, threshold: float | None) -> None:
        self._uuid = uuid
        self._recover = recover
        self._threshold = threshold

    def past_threshold(self, choice: ModelChoice | None, tokens: int) -> bool:
        """Whether `tokens` of context pass `[compaction] threshold` of the model's maximum
        input (its window less what output keeps for itself)."""
        if self._threshold is None or choice is None or self._recover is None:
            return False
        try:
            info = model_info(choice.model, choice.provider)
        except GroveError:
            return False
        return tokens >= info.input_share(self._threshold)

    async def compacted(
        self,
        result: TurnResult,
        reason: str,
        tokens: int,
        error: ProviderError | None,
        emit: Emit,
    ) -> list[Message] | None:
        """The supervisor's compaction of the stored context, plus what this turn added and
        the store does not hold yet: the agent's history from now on. None when declined
        (an overflow, `error`, then fails the turn with a clear message)."""
        compacted = (
            None if self._recover is None else await self._recover(self._uuid, reason, tokens)
        )
        if compacted is None:
            if error is not None:
                raise ContextRecoveryError(
                    f"Context overflow recovery failed: {error}; /compact or a model with a "
                    "larger window may help"
                ) from error
            return None
        again = "" if reason == "threshold" else "; asking again"
        emit(ProviderWarning(text=f"── context compacted ({reason}){again} ──"))
        unsaved = [entry for entry in result.entries if STORED not in entry.data]
        return to_messages([*compacted, *unsaved])
