"""`OutputModels`: the pydantic models a Grove's typed answers are read into, by agent (the
output types given to create_root, fork_many and send), and the reading itself.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from grove.actors.turn_result import TurnResult
from grove.supervisor.output_types import OutputTypeLike, model_of, typed


class OutputModels:
    """By agent, the model its answers are read into (none for a schema dict)."""

    def __init__(self) -> None:
        self._by_agent: dict[str, type[BaseModel]] = {}

    def remember(self, agents: Sequence[str], output_type: OutputTypeLike | None) -> None:
        model = model_of(output_type)
        if model is not None:
            self._by_agent.update(dict.fromkeys(agents, model))

    def of(self, agent: str) -> type[BaseModel] | None:
        return self._by_agent.get(agent)

    def typed(self, agent: str, result: TurnResult) -> TurnResult:
        """`result` with its answer read into the agent's model, if it has one."""
        return typed(result, self._by_agent.get(agent))
