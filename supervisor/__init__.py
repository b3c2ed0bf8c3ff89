"""Grove's control plane and its public Python API (`from grove import Grove`).

Only this package touches the store; the CLI and users' programs come in through `Grove`.
Ray and the tools are imported on first use, so that light commands stay fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from grove.actors.tools.python import tool
    from grove.supervisor.api import Grove
    from grove.supervisor.api_turn import Turn
    from grove.supervisor.async_api import AsyncGrove, AsyncTurn
    from grove.supervisor.budget_rules import Budget

__all__ = ["AsyncGrove", "AsyncTurn", "Budget", "Grove", "Turn", "tool"]
_FROM_API = ("Grove", "Turn")
_FROM_ASYNC_API = ("AsyncGrove", "AsyncTurn")


def __getattr__(name: str) -> Any:
    """Each name is imported on first use: `supervisor.store` alone stays light."""
    if name == "tool":
        from grove.actors.tools.python import tool

        return tool
    if name == "Budget":
        from grove.supervisor.budget_rules import Budget

        return Budget
    if name in _FROM_API or name in _FROM_ASYNC_API:
        from grove.supervisor.local_ray import keep_local_ray_on_loopback

        keep_local_ray_on_loopback(None)
        from grove.supervisor import api, async_api

        return getattr(api if name in _FROM_API else async_api, name)
    raise AttributeError(f"module 'grove.supervisor' has no attribute {name!r}")
