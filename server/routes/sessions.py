"""A session (a root and whoever talks to it): the agent it speaks to now, who answers its
tools' approval requests, and its todo list.
"""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter
from pydantic import BaseModel, Field

from grove.server.routes.fields import Text
from grove.supervisor.api import Grove


class TodoIn(BaseModel):
    markdown: Text


class AttendIn(BaseModel):
    attend: bool = Field(description="true: the session's approval requests come in its streams")


class DecisionIn(BaseModel):
    decision: Literal["y", "n", "a"] = Field(description="yes, no, or always for the session")


def sessions_router(grove: Grove) -> APIRouter:
    router = APIRouter()

    @router.get("/api/sessions/{session}/focus")
    def focus(session: str) -> dict[str, str]:
        """The agent a session (a root) speaks to now: /switch moves it."""
        return {"agent": grove.focus(grove.agent(session).uuid)}

    @router.post("/api/sessions/{session}/approvals")
    def attend(session: str, body: AttendIn) -> dict[str, bool]:
        """A client that asks a person about tools whose policy is "ask": their requests come
        in the session's turn streams as `approval` deltas, answered at /api/approvals/ID."""
        grove.attend_approvals(grove.agent(session).uuid, body.attend)
        return {"attend": body.attend}

    @router.post("/api/approvals/{request}")
    def answer(request: str, body: DecisionIn) -> dict[str, str]:
        return {"text": grove.answer_approval(request, body.decision)}

    @router.post("/api/sessions/{session}/todo")
    def set_todo(session: str, body: TodoIn) -> dict[str, str]:
        return {"text": grove.set_todo(grove.agent(session).uuid, body.markdown)}

    return router
