"""Grove's records as Redis values: a message's body as the append script stores it, and
replies (untrusted) decoded into validated records. No commands are sent from here.
"""

from __future__ import annotations

from grove.supervisor.errors import StoreError
from grove.supervisor.store.codec import decode_json, encode_json, validate_record
from grove.supervisor.store.records import EventRecord, MessageRecord
from grove.supervisor.store.write_checks import PreparedMessage


def stored_message(raw: bytes, score: float, uuid: str) -> MessageRecord:
    """A message record read from an agent's sorted set, checked against its place there."""
    record = validate_record(MessageRecord, raw, f"message record {int(score)} of {uuid!r}")
    if record.id != int(score) or record.agent_uuid != uuid:
        raise StoreError(
            f"Corrupted message record {int(score)} of {uuid!r} in the store: "
            f"it claims id {record.id} of agent {record.agent_uuid}"
        )
    return record


def message_body(item: PreparedMessage) -> str:
    """The stored JSON of a message minus its id, which the append script splices in."""
    message = item.message
    head = encode_json(
        {
            "agent_uuid": message.agent_uuid,
            "kind": message.kind,
            "content": message.content,
            "created_at": item.created_at,
            "ticket": message.ticket,
        },
        "Message",
    )
    return head[:-1] + ',"data":' + item.data_json + "}"


def event_from_entry(entry_id: bytes, fields: dict[bytes, bytes]) -> EventRecord:
    id_text, _, sequence = entry_id.decode("ascii", "replace").partition("-")
    what = f"event record {id_text}"
    body = decode_json(fields.get(b"e", b""), what)
    if sequence != "0" or not isinstance(body, dict):
        raise StoreError(f"Corrupted {what} in the store: not an event Grove wrote")
    return validate_record(EventRecord, {**body, "id": int(id_text)}, what)


def reply_text(raw: object, what: str) -> str:
    if isinstance(raw, str):
        return raw
    if not isinstance(raw, bytes):
        raise StoreError(f"Corrupted {what} in the store: not text")
    try:
        return raw.decode()
    except UnicodeDecodeError as exc:
        raise StoreError(f"Corrupted {what} in the store: not UTF-8 text") from exc


def reply_integer(raw: object, what: str) -> int:
    text = reply_text(raw, what)
    if not text.isdigit():
        raise StoreError(f"Corrupted {what} in the store: not a number")
    return int(text)
