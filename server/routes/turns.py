"""An agent's turns: a prompt (answered with its result, once begun, or as a stream of
Server-Sent Events), the stream of the turn in progress, its wait, its cancelling.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, Field
from sse_starlette.sse import EventSourceResponse

from grove.providers.base import DEFAULT_OUTPUT_RETRIES, MAX_OUTPUT_RETRIES
from grove.server.routes.fields import Text
from grove.supervisor.api import Grove
from grove.supervisor.async_api import AsyncGrove
from grove.supervisor.results import result_json


class PromptIn(BaseModel):
    text: Text = Field(min_length=1)
    stream: bool = Field(default=False, description="true: Server-Sent Events of the deltas")
    wait: bool = Field(
        default=True,
        description="false (without stream): answer once the turn has begun; /wait has its result",
    )
    output_type: dict[str, Any] | None = Field(
        default=None, description="a JSON schema (its root an object): this answer typed"
    )
    output_retries: int = Field(
        default=DEFAULT_OUTPUT_RETRIES,
        ge=0,
        le=MAX_OUTPUT_RETRIES,
        description="how many times a malformed answer goes back to the model",
    )


def turns_router(grove: Grove, aio: AsyncGrove) -> APIRouter:
    """Its routes that wait do on the event loop (`aio`, the same Grove): none blocks it."""
    router = APIRouter()

    @router.post("/api/agents/{agent}/prompts", response_model=None)
    async def prompt(agent: str, body: PromptIn) -> dict[str, Any] | EventSourceResponse:
        uuid = (await aio.agent(agent)).uuid
        turn = aio.send(
            uuid, body.text, output_type=body.output_type, output_retries=body.output_retries
        )
        await turn  # begun here: a refusal is the answer, not a stream cut short
        if not body.stream:
            return result_json(await turn.result()) if body.wait else {"agent": turn.agent}

        async def deltas() -> AsyncIterator[dict[str, str]]:
            async for kind, text in turn:
                yield {"event": "delta", "data": json.dumps({"kind": kind, "text": text})}
            result = await turn.result()
            yield {"event": "result", "data": json.dumps(result_json(result))}

        return EventSourceResponse(deltas())

    @router.get("/api/agents/{agent}/stream")
    def watch(agent: str) -> EventSourceResponse:
        """The deltas of the agent's turn in progress, to its end (then `end`)."""
        uuid = grove.agent(agent).uuid

        async def deltas() -> AsyncIterator[dict[str, str]]:
            async for kind, text in aio.watch(uuid):
                yield {"event": "delta", "data": json.dumps({"kind": kind, "text": text})}
            yield {"event": "end", "data": "{}"}

        return EventSourceResponse(deltas())

    @router.get("/api/agents/{agent}/wait")
    async def wait(agent: str, timeout: float = 60.0) -> dict[str, Any]:  # noqa: ASYNC109
        """The result of the agent's turn in progress once it ends (or of its last turn);
        `result` is null when none ended within `timeout` seconds."""
        uuid = (await aio.agent(agent)).uuid
        result = await aio.wait_turn(uuid, max(0.0, min(timeout, 3600.0)))
        return {"agent": uuid, "result": None if result is None else result_json(result)}

    @router.post("/api/agents/{agent}/cancel")
    def cancel(agent: str) -> dict[str, bool]:
        return {"cancelled": grove.cancel(grove.agent(agent).uuid)}

    return router
