"""The agents themselves: a new root, an agent's record, its forks, its history (seeded or
read), its advice, a command in its session, its killing.
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, HTTPException
from pydantic import BaseModel, Field

from grove.providers.base import DEFAULT_OUTPUT_RETRIES, MAX_OUTPUT_RETRIES, Tier
from grove.server.routes.fields import (
    MAX_NAMES,
    ForkOptionsIn,
    Name,
    Names,
    Text,
    store_reads,
)
from grove.supervisor.agent_tiers import tier_of
from grove.supervisor.api import Grove
from grove.supervisor.budget_rules import Budget
from grove.supervisor.tool_files import importable
from grove.supervisor.tree_view import AGENT_FIELDS, message_json

MAX_FORKS = 10_000


def output_retries_field() -> Any:
    return Field(
        default=DEFAULT_OUTPUT_RETRIES,
        ge=0,
        le=MAX_OUTPUT_RETRIES,
        description="how many times a malformed answer goes back to the model",
    )


class RootIn(BaseModel):
    model: Name | None = Field(default=None, description="MODEL[/THINKING]; else [defaults]")
    system: Text | None = None
    isolation: Literal["process"] | None = Field(
        default=None, description="process: the root's tree gets a host process of its own"
    )
    tools: Names | None = Field(
        default=None, description="built-in names, mcp__SERVER, package.module:attr"
    )
    tool_files: dict[Name, Text] = Field(
        default_factory=dict,
        max_length=MAX_NAMES,
        description="source files of the tools' modules by relative path (modules the "
        "service cannot import itself)",
    )
    allow: Names = Field(default_factory=list, description="tools that need no asking")
    budget: dict[str, Any] | None = Field(default=None, description="Budget(...) fields")
    output_type: dict[str, Any] | None = Field(
        default=None, description="a JSON schema (its root an object): every answer typed"
    )
    output_retries: int = output_retries_field()
    tier: Tier | None = Field(default=None, description="price tier; else [defaults]")


class CommandIn(BaseModel):
    line: Text = Field(min_length=1, description="a command line, as typed in the chat")
    origin: str = Field(default="api", max_length=40, description="who typed it, for events")


class ForkIn(ForkOptionsIn):
    """`fork_many`'s parameters: each field but prompts, model and budget goes as it is."""

    prompts: list[Text] = Field(min_length=1, max_length=MAX_FORKS)
    model: Name | None = None
    system: Text | None = Field(default=None, description="the children's, not the parent's")
    advisor: Name | None = Field(default=None, description="MODEL[/THINKING]: a reviewer each")
    keys: list[Name] | None = Field(
        default=None, max_length=MAX_FORKS, description="one per prompt: a repeat returns them"
    )
    budget: dict[str, Any] | None = None
    output_type: dict[str, Any] | None = Field(
        default=None, description="a JSON schema (its root an object): the answers typed"
    )
    output_retries: int = output_retries_field()


class SeedIn(BaseModel):
    messages: list[tuple[Literal["user", "assistant"], Text]] = Field(
        min_length=1, description="(kind, content) pairs appended to the history, no turn run"
    )


def budget_of(given: dict[str, Any] | None) -> Budget | None:
    """The budget a request gives (400 for one that is not a budget)."""
    try:
        return Budget.from_dict(given) if given else None
    except ValueError as exc:
        raise HTTPException(400, str(exc)) from exc


def agents_router(grove: Grove) -> APIRouter:
    router = APIRouter()

    @router.post("/api/roots", status_code=201)
    def create_root(body: RootIn) -> dict[str, Any]:
        budget = budget_of(body.budget)
        with importable(body.tool_files):
            record = grove.create_root(
                body.model,
                system=body.system,
                isolation=body.isolation,
                tools=body.tools or (),
                allow=body.allow,
                budget=budget,
                output_type=body.output_type,
                output_retries=body.output_retries,
                tier=body.tier,
            )
        return record.model_dump(include=AGENT_FIELDS)

    @router.get("/api/agents/{agent}")
    def agent_record(agent: str) -> dict[str, Any]:
        """The agent's record (a unique prefix of its uuid will do), with what its tools may do
        without asking in `metadata.tool_policy` and its price tier in `metadata.tier`."""
        found = grove.agent(agent)
        record: dict[str, Any] = found.model_dump(include=AGENT_FIELDS)
        record["metadata"] = {
            "tool_policy": found.metadata.get("tool_policy", {}),
            "tier": tier_of(found),
        }
        return record

    @router.post("/api/agents/{agent}/commands")
    def command(agent: str, body: CommandIn) -> dict[str, Any]:
        outcome = grove.dispatch(grove.agent(agent).uuid, body.line, body.origin)
        return {"ok": outcome.ok, "text": outcome.text, "data": outcome.data}

    @router.post("/api/agents/{agent}/fork", status_code=201)
    def fork(agent: str, body: ForkIn) -> dict[str, list[str]]:
        options = body.model_dump(exclude={"prompts", "model", "budget"})  # fork_many's own
        parent = grove.agent(agent).uuid
        budget = budget_of(body.budget)
        children = grove.fork_many(parent, body.prompts, body.model, budget=budget, **options)
        return {"children": children}

    @router.post("/api/agents/{agent}/kill")
    def kill(agent: str) -> dict[str, Any]:
        uuid = grove.agent(agent).uuid
        outcome = grove.dispatch(uuid, f"/kill {uuid} --yes")
        return {"ok": outcome.ok, "text": outcome.text}

    @router.post("/api/agents/{agent}/seed", status_code=201)
    def seed(agent: str, body: SeedIn) -> dict[str, list[Any]]:
        """Messages appended to the agent's history at once, running no turn: a shared
        context its children inherit (`grove batch --context`)."""
        stored = grove.seed(grove.agent(agent).uuid, list(body.messages))
        return {
            "ids": [message.id for message in stored],
            "messages": [message_json(message) for message in stored],
        }

    @router.get("/api/agents/{agent}/history")
    def history(agent: str) -> dict[str, Any]:
        with store_reads(grove) as opened:
            return opened.history(agent)

    @router.get("/api/agents/{agent}/advice")
    def advice(agent: str) -> dict[str, Any]:
        uuid = grove.agent(agent).uuid
        return {"agent": uuid, "advice": [message_json(m) for m in grove.advice(uuid)]}

    return router
