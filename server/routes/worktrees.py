"""Grove's git worktrees of a repository on the service's machine, with their agents, branches
and diff stats, as `grove worktrees` lists (and prunes) them."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, Field

from grove.server.routes.fields import store_reads
from grove.supervisor.api import Grove


class WorktreesIn(BaseModel):
    repository: str = Field(min_length=1, max_length=4096, description="a path in the repository")
    prune: bool = False


def worktrees_router(grove: Grove) -> APIRouter:
    router = APIRouter()

    @router.post("/api/worktrees")
    def worktrees(body: WorktreesIn) -> dict[str, Any]:
        """Grove's worktrees of the repository at `repository` (a path on the service's
        machine), with their agents, branches and diff stats; `prune` removes those of ended
        agents and those merged into HEAD, as `grove worktrees --prune` does."""
        with store_reads(grove) as opened:
            return {"worktrees": opened.worktrees(body.repository, body.prune)}

    return router
