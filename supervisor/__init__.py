"""Grove's control plane and its public Python API (`from supervisor import Grove`).

Only this package touches the store; the CLI and users' programs come in through `Grove`.
Ray and the tools are imported on first use, so that light commands stay fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from actors.tools.python import tool
    from supervisor.api import Grove, Turn
    from supervisor.budget_rules import Budget

__all__ = ["Budget", "Grove", "Turn", "tool"]
_FROM_API = ("Grove", "Turn")


def __getattr__(name: str) -> Any:
    """Each name is imported on first use: `supervisor.store` alone stays light."""
    if name == "tool":
        from actors.tools.python import tool

        return tool
    if name == "Budget":
        from supervisor.budget_rules import Budget

        return Budget
    if name in _FROM_API:
        from supervisor.local_ray import keep_local_ray_on_loopback

        keep_local_ray_on_loopback(None)
        from supervisor import api

        return getattr(api, name)
    raise AttributeError(f"module 'supervisor' has no attribute {name!r}")
