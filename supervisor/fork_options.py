"""`ForkOptions`: what every child of one `fork_many` (or of one batch) gets alike, one field an
option, passed as it is from any Grove (local, served, async) to the supervisor's core.
"""

from __future__ import annotations

from typing import TypedDict


class ForkOptions(TypedDict, total=False):
    """Part of the Grove interface (supervisor/contract.py). A new option is a field here,
    its use in supervisor/core/forks.py, a field of the routes' models (server/routes/) and
    a CLI option: no Grove, route or surface between passes it on by name.

    `workspace`: "shared" (the parent's directory) or "worktree" (a git worktree each;
    default: `[tools] workspace`); `tools`: the names of the parent's tools the children keep
    (default: all of them; a name the parent lacks refuses the fork); `tier`: the children's
    price tier, "standard", "flex" or "batch" (default: the parent's; providers/tier_rules.py)."""

    workspace: str | None
    tools: list[str] | None
    tier: str | None
