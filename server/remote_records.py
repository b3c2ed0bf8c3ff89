"""What a client of the Grove service reads its answers into: `RemoteRecord` (an agent, an
`AgentView`), `RemoteMessage` (a stored message, a `MessageView`), and what a request carries
of an output type.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from grove.supervisor.contract import OutputSchema


@dataclass(frozen=True, slots=True)
class RemoteRecord:
    """What a command needs of an agent's record (an `AgentView`)."""

    uuid: str
    name: str | None = None
    parent_uuid: str | None = None
    provider: str | None = None
    model: str | None = None
    thinking_level: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)  # its `tool_policy` alone


def record_of(data: dict[str, Any]) -> RemoteRecord:
    fields = ("name", "parent_uuid", "provider", "model", "thinking_level")
    given = {name: data.get(name) for name in fields}
    return RemoteRecord(data["uuid"], **given, metadata=data.get("metadata") or {})


@dataclass(frozen=True, slots=True)
class RemoteMessage:
    """A message the service stored (a `MessageView`)."""

    id: int
    kind: str
    content: str


def message_of(data: dict[str, Any]) -> RemoteMessage:
    return RemoteMessage(data["id"], data["kind"], data["content"])


def typed_fields(output_type: OutputSchema | None, output_retries: int) -> dict[str, Any]:
    """What a request carries of an output type: nothing without one."""
    if output_type is None:
        return {}
    return {"output_type": output_type, "output_retries": output_retries}
