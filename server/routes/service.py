"""The service's own routes: `/healthz` (no token), the dashboard's page, what a command line
takes from its configuration, and the model catalog.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import APIRouter
from fastapi.responses import FileResponse

from grove.supervisor.api import Grove
from grove.supervisor.command_defaults import command_defaults

STATIC = Path(__file__).parent.parent / "static"


def service_router(grove: Grove) -> APIRouter:
    router = APIRouter()

    @router.get("/healthz")
    def healthz() -> dict[str, bool]:
        return {"ok": True}

    @router.get("/", include_in_schema=False)
    def dashboard() -> FileResponse:
        return FileResponse(STATIC / "index.html", media_type="text/html")

    @router.get("/api/settings")
    def settings() -> dict[str, Any]:
        """What a command line takes from the service's configuration: the default model,
        aliases, the roots' default tools, how a budget given with it is kept, and what it
        checks before it starts (the providers with a key here, MCP servers that cannot
        start; never a key)."""
        simulated = grove.simulate or grove.endpoint is not None
        return command_defaults(grove.settings, simulated=simulated).as_dict()

    @router.get("/api/models")
    def models(include_retired: bool = False, provider: str | None = None) -> dict[str, Any]:
        """The catalog as `grove models` shows it, with each model's standing on the
        service's day."""
        return {"models": grove.models(include_retired, provider)}

    return router
