"""Grove's control plane and its public Python API (`from supervisor import Grove`).

Only this package touches the store; the CLI and users' programs come in through `Grove`.
Ray is imported on first use of the API, so that light commands stay fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from actors.tools.python import tool
from supervisor.budget_rules import Budget

if TYPE_CHECKING:
    from supervisor.api import Grove, Turn

__all__ = ["Budget", "Grove", "Turn", "tool"]
_FROM_API = ("Grove", "Turn")


def __getattr__(name: str) -> Any:
    if name in _FROM_API:
        from supervisor.local_ray import keep_local_ray_on_loopback

        keep_local_ray_on_loopback(None)
        from supervisor import api

        return getattr(api, name)
    raise AttributeError(f"module 'supervisor' has no attribute {name!r}")
