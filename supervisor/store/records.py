"""Grove's stored records (agents, messages, events) as frozen, strictly validated pydantic models;
shapes and per-record rules only (layouts: sqlite_rows.py, redis_values.py; decoding: codec.py).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from grove.providers.base import ThinkingLevel

AgentRole = Literal["root", "child", "advisor"]
AgentStatus = Literal["running", "dead", "reaped"]

# Ids end up in Redis key names and in prefix lookups: a small, unambiguous alphabet
# (uuid4 in either spelling fits).
AgentId = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")]
MessageKind = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,31}$")]
EventKind = Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$")]
Ticket = Annotated[str, Field(min_length=1, max_length=200)]

_STRICT_FROZEN = ConfigDict(frozen=True, strict=True, extra="forbid")

# Fields an agent keeps for life: update_agent refuses to change them.
IMMUTABLE_AGENT_FIELDS = frozenset({"uuid", "parent_uuid", "role", "fork_message_id", "created_at"})


class AgentRecord(BaseModel):
    """One agent of the tree. `fork_message_id` 0 means it inherited no messages."""

    model_config = _STRICT_FROZEN

    uuid: AgentId
    name: str | None = None
    parent_uuid: AgentId | None = None
    role: AgentRole
    watched_uuid: AgentId | None = None
    fork_message_id: Annotated[int, Field(ge=0)] = 0
    provider: str | None = None
    model: str | None = None
    thinking_level: ThinkingLevel | None = None
    status: AgentStatus = "running"
    created_at: float
    ended_at: float | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _tree_rules(self) -> AgentRecord:
        if self.role == "root" and self.parent_uuid is not None:
            raise ValueError("a root agent has no parent")
        if self.role == "child" and self.parent_uuid is None:
            raise ValueError("a child agent needs a parent_uuid")
        if self.fork_message_id > 0 and self.parent_uuid is None:
            raise ValueError("fork_message_id > 0 needs a parent_uuid to inherit from")
        if self.parent_uuid == self.uuid or self.watched_uuid == self.uuid:
            raise ValueError("an agent cannot be its own parent or watch itself")
        return self


class NewMessage(BaseModel):
    """A message about to be appended: a MessageRecord before the store gives it an id."""

    model_config = _STRICT_FROZEN

    agent_uuid: AgentId
    kind: MessageKind
    content: str
    data: dict[str, Any] = Field(default_factory=dict)
    ticket: Ticket | None = None


class MessageRecord(BaseModel):
    """A stored message; `id` is global and strictly increasing across all agents."""

    model_config = _STRICT_FROZEN

    id: Annotated[int, Field(ge=1)]
    agent_uuid: AgentId
    kind: MessageKind
    content: str
    data: dict[str, Any] = Field(default_factory=dict)
    created_at: float
    ticket: Ticket | None = None


class EventRecord(BaseModel):
    """One entry of the event log (a projection: nothing controls flow by reading it)."""

    model_config = _STRICT_FROZEN

    id: Annotated[int, Field(ge=1)]
    kind: EventKind
    payload: dict[str, Any] = Field(default_factory=dict)
    created_at: float
