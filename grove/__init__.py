"""Grove's import root and public API: `from grove import Grove` (SPEC 19).

Every package of Grove's lives under `grove.` (supervisor, actors, providers, simulator, cli,
server); the names below are imported on first use, so `import grove` stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from grove.actors.tools.python import tool
    from grove.providers.errors import GroveError
    from grove.supervisor.api import Grove
    from grove.supervisor.api_turn import Turn
    from grove.supervisor.async_api import AsyncGrove, AsyncTurn
    from grove.supervisor.budget_rules import Budget
    from grove.supervisor.errors import CommandError

__all__ = [
    "AsyncGrove",
    "AsyncTurn",
    "Budget",
    "CommandError",
    "Grove",
    "GroveError",
    "Turn",
    "tool",
]


def __getattr__(name: str) -> Any:
    """The public names, each imported when first asked for."""
    if name == "GroveError":
        from grove.providers.errors import GroveError

        return GroveError
    if name == "CommandError":
        from grove.supervisor.errors import CommandError

        return CommandError
    if name in __all__:
        from grove import supervisor

        return getattr(supervisor, name)
    raise AttributeError(f"module 'grove' has no attribute {name!r}")
