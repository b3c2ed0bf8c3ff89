"""What a store is asked to write, checked before a backend sees it: records validated again,
JSON encoded, sizes held to the limit, ids kept to the key alphabet. No storage calls here.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter, ValidationError

from grove.supervisor.errors import StoreError
from grove.supervisor.store.codec import describe, encode_json, utf8_size
from grove.supervisor.store.records import (
    AgentId,
    AgentRecord,
    EventKind,
    MessageRecord,
    NewMessage,
)

_EVENT_KIND: TypeAdapter[str] = TypeAdapter(EventKind)
_AGENT_ID: TypeAdapter[str] = TypeAdapter(AgentId)


@dataclass(frozen=True, kw_only=True)
class PreparedEvent:
    """A checked event with its payload already encoded and its time taken."""

    kind: str
    payload_json: str
    created_at: float


@dataclass(frozen=True, kw_only=True)
class PreparedMessage:
    """A checked NewMessage with its data already encoded and its time taken."""

    message: NewMessage
    data_json: str
    created_at: float

    def record(self, message_id: int) -> MessageRecord:
        """The stored form, data decoded from the exact JSON that was written."""
        return MessageRecord(
            id=message_id,
            agent_uuid=self.message.agent_uuid,
            kind=self.message.kind,
            content=self.message.content,
            data=json.loads(self.data_json),
            created_at=self.created_at,
            ticket=self.message.ticket,
        )


def prepare_messages(messages: Sequence[NewMessage], max_bytes: int) -> list[PreparedMessage]:
    """Each message checked again, its data encoded; StoreError when one exceeds `max_bytes`."""
    now = time.time()
    prepared = []
    for message in messages:
        checked = _revalidate_message(message)
        data_json = encode_json(checked.data, "Message data")
        size = utf8_size(checked.content, "Message content") + len(data_json.encode())
        if size > max_bytes:
            raise StoreError(
                f"Message of {size:,} bytes exceeds the store's limit of "
                f"{max_bytes:,} bytes; nothing was written"
            )
        prepared.append(PreparedMessage(message=checked, data_json=data_json, created_at=now))
    return prepared


def prepare_event(kind: str, payload: dict[str, Any], max_bytes: int) -> PreparedEvent:
    """A new event, checked and encoded."""
    try:
        _EVENT_KIND.validate_python(kind)
    except ValidationError as exc:
        raise StoreError(f"Invalid event kind: {describe(exc)}; nothing was written") from exc
    if not isinstance(payload, dict):
        raise StoreError(f"The payload of event {kind} is not a dict; nothing was written")
    payload_json = encode_json(payload, f"Payload of event {kind}")
    if len(payload_json.encode()) > max_bytes:
        raise StoreError(
            f"Event payload exceeds the store's limit of {max_bytes:,} bytes; nothing was written"
        )
    return PreparedEvent(kind=kind, payload_json=payload_json, created_at=time.time())


def ticketed(existing: MessageRecord, agent_uuid: str) -> MessageRecord:
    """The message stored under a ticket, if it is this agent's; a ticket is never shared."""
    if existing.agent_uuid != agent_uuid:
        raise StoreError(
            f"Ticket {existing.ticket} already belongs to a message of agent "
            f"{existing.agent_uuid}; nothing was written"
        )
    return existing


def checked_id(value: str, what: str) -> str:
    """A holder's or a root's id: the alphabet of agent ids (it ends up in key names)."""
    try:
        return _AGENT_ID.validate_python(value)
    except ValidationError as exc:
        raise StoreError(f"Invalid {what} id: {describe(exc)}; nothing was written") from exc


def revalidate_agent(record: AgentRecord) -> AgentRecord:
    """Check a record again: model_construct or a subclass could have skipped validation."""
    try:
        checked = AgentRecord.model_validate(dict(record))
    except (ValidationError, TypeError) as exc:
        reason = describe(exc) if isinstance(exc, ValidationError) else "not an agent record"
        raise StoreError(f"Invalid agent record: {reason}; nothing was written") from exc
    check_encodable(checked)
    return checked


def check_encodable(record: AgentRecord) -> None:
    """Refuse what validation lets through but no store can hold (sets, unpaired surrogates)."""
    encode_json(record.metadata, f"Metadata of agent {record.uuid}")
    for field, value in (
        ("name", record.name),
        ("provider", record.provider),
        ("model", record.model),
    ):
        if value is not None:
            utf8_size(value, f"The {field} of agent {record.uuid}")


def _revalidate_message(message: NewMessage) -> NewMessage:
    try:
        return NewMessage.model_validate(dict(message))
    except (ValidationError, TypeError) as exc:
        reason = describe(exc) if isinstance(exc, ValidationError) else "not a message"
        raise StoreError(f"Invalid message: {reason}; nothing was written") from exc
