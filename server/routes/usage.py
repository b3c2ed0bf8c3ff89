"""What was spent: tokens and cost by agent, model, provider or day, as `grove usage` groups
them."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException

from grove.server.routes.fields import store_reads
from grove.supervisor.api import Grove
from grove.supervisor.usage import GROUPINGS


def usage_router(grove: Grove) -> APIRouter:
    router = APIRouter()

    @router.get("/api/usage")
    def usage(by: str = "agent", agent: str | None = None) -> dict[str, Any]:
        if by not in GROUPINGS:
            raise HTTPException(400, f"by is one of {', '.join(GROUPINGS)}, not {by!r}")
        with store_reads(grove) as opened:
            return opened.usage(agent, by)

    return router
