"""How SQLite rows and Grove's records map onto each other: the column lists, the statements
built from them, and rows decoded (untrusted) into validated records. No connection here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from grove.supervisor.errors import StoreError
from grove.supervisor.store.codec import decode_json, encode_json, validate_record
from grove.supervisor.store.records import AgentRecord, EventRecord, MessageRecord

AGENT_COLUMNS = (
    "uuid",
    "name",
    "parent_uuid",
    "role",
    "watched_uuid",
    "fork_message_id",
    "provider",
    "model",
    "thinking_level",
    "status",
    "created_at",
    "ended_at",
    "metadata",
)
AGENT_SELECT = f"SELECT {', '.join(AGENT_COLUMNS)} FROM agents"
AGENT_INSERT = (
    f"INSERT INTO agents ({', '.join(AGENT_COLUMNS)}) "
    f"VALUES ({', '.join('?' for _ in AGENT_COLUMNS)})"
)
AGENT_UPDATE = (
    f"UPDATE agents SET {', '.join(f'{c} = ?' for c in AGENT_COLUMNS[1:])} WHERE uuid = ?"
)
MESSAGE_COLUMNS = ("id", "agent_uuid", "kind", "content", "data", "created_at", "ticket")
MESSAGE_SELECT = f"SELECT {', '.join(MESSAGE_COLUMNS)} FROM messages"


def agent_row(record: AgentRecord) -> tuple[Any, ...]:
    """The record's columns; its fields are plain values but the metadata, encoded here."""
    metadata = encode_json(record.metadata, f"Metadata of agent {record.uuid}")
    return tuple(
        metadata if column == "metadata" else getattr(record, column) for column in AGENT_COLUMNS
    )


def agent_from_row(row: Sequence[Any]) -> AgentRecord:
    fields = dict(zip(AGENT_COLUMNS, row, strict=True))
    what = f"agent record {_label(fields['uuid'])}"
    fields["metadata"] = decode_json(fields["metadata"], what)
    return validate_record(AgentRecord, fields, what)


def message_from_row(row: Sequence[Any]) -> MessageRecord:
    fields = dict(zip(MESSAGE_COLUMNS, row, strict=True))
    what = f"message record {_label(fields['id'])}"
    fields["data"] = decode_json(fields["data"], what)
    return validate_record(MessageRecord, fields, what)


def event_from_row(row: Sequence[Any]) -> EventRecord:
    fields = dict(zip(("id", "kind", "payload", "created_at"), row, strict=True))
    what = f"event record {_label(fields['id'])}"
    fields["payload"] = decode_json(fields["payload"], what)
    return validate_record(EventRecord, fields, what)


def _label(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def stored_text(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise StoreError(f"Corrupted {what} in the store: {_label(value)}")
    return value
