"""Agents and messages written to a Redis store in one WATCHed transaction, tickets honoured,
and the range read of an agent's messages that writes and reads share.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import redis
from redis.exceptions import WatchError

from grove.supervisor.errors import StoreError
from grove.supervisor.store.codec import encode_json
from grove.supervisor.store.records import AgentRecord, MessageRecord
from grove.supervisor.store.redis_connection import RedisConnection
from grove.supervisor.store.redis_keys import RedisKeys
from grove.supervisor.store.redis_scripts import APPEND_MESSAGE
from grove.supervisor.store.redis_values import message_body, reply_text, stored_message
from grove.supervisor.store.write_checks import PreparedMessage, ticketed

# A WATCHed write that another client keeps disturbing is retried this many times.
_WATCH_ATTEMPTS = 5


def write_agents_and_messages(
    conn: RedisConnection,
    keys: RedisKeys,
    records: Sequence[AgentRecord],
    messages: Sequence[PreparedMessage],
) -> list[MessageRecord]:
    """Insert checked agents, then messages, in one WATCHed transaction: a ticket already
    stored returns its message; retried while other writers disturb the same keys."""
    agent_values = [
        (record, encode_json(record.model_dump(), f"Record of agent {record.uuid}"))
        for record in records
    ]
    bodies = [message_body(item) for item in messages]
    with conn.mapped("write agents and messages"):
        for _ in range(_WATCH_ATTEMPTS):
            try:
                written = _try_write(conn.client, keys, agent_values, messages, bodies)
            except WatchError:
                continue
            return written
    raise StoreError("Other writers kept changing the same records; nothing was written")


def _try_write(
    client: redis.Redis,
    keys: RedisKeys,
    agent_values: Sequence[tuple[AgentRecord, str]],
    messages: Sequence[PreparedMessage],
    bodies: Sequence[str],
) -> list[MessageRecord]:
    agent_keys = [keys.agent(record.uuid) for record, _ in agent_values]
    ticket_keys = sorted(
        {keys.ticket(item.message.ticket) for item in messages if item.message.ticket}
    )
    with client.pipeline(transaction=True) as pipe:
        if agent_keys or ticket_keys:
            pipe.watch(*agent_keys, *ticket_keys)  # type: ignore[no-untyped-call]
        if agent_keys and pipe.exists(*agent_keys):
            raise StoreError("An agent of this batch already exists; nothing was written")
        prior = _stored_tickets(pipe, keys, ticket_keys)
        pipe.multi()
        queued = 0  # commands queued so far: replies come back in this order
        for record, value in agent_values:
            pipe.set(keys.agent(record.uuid), value)
            pipe.zadd(keys.agent_index, {record.uuid: 0})
            queued += 2
            if record.parent_uuid is not None:
                pipe.sadd(keys.children(record.parent_uuid), record.uuid)
                queued += 1
        results: list[MessageRecord | None] = []
        new_ids_at: dict[int, int] = {}  # result slot -> reply index of its script
        first_slot: dict[str, int] = {}  # ticket key -> slot of its first use in this batch
        same_as: dict[int, int] = {}
        for slot, (item, body) in enumerate(zip(messages, bodies, strict=True)):
            message = item.message
            ticket_key = keys.ticket(message.ticket) if message.ticket else None
            if ticket_key in prior:
                results.append(ticketed(prior[ticket_key], message.agent_uuid))
                continue
            results.append(None)
            if ticket_key is not None and ticket_key in first_slot:
                earlier = messages[first_slot[ticket_key]].message
                if earlier.agent_uuid != message.agent_uuid:
                    raise StoreError(
                        f"Ticket {message.ticket} is used for two agents in one batch; "
                        "nothing was written"
                    )
                same_as[slot] = first_slot[ticket_key]
                continue
            script_keys = [keys.message_seq, keys.messages(message.agent_uuid)]
            if ticket_key is not None:
                first_slot[ticket_key] = slot
                script_keys.append(ticket_key)
            pipe.eval(APPEND_MESSAGE, len(script_keys), *script_keys, body, message.agent_uuid)
            new_ids_at[slot] = queued
            queued += 1
        replies = pipe.execute()
    for slot, reply_index in new_ids_at.items():
        results[slot] = messages[slot].record(int(replies[reply_index]))
    for slot, first in same_as.items():
        results[slot] = results[first]
    return [result for result in results if result is not None]


def _stored_tickets(
    pipe: Any, keys: RedisKeys, ticket_keys: Sequence[str]
) -> dict[str, MessageRecord]:
    """The messages already stored under these ticket keys (read while WATCHing them)."""
    if not ticket_keys:
        return {}
    stored = {}
    for key, raw in zip(ticket_keys, pipe.mget(ticket_keys), strict=True):
        if raw is None:
            continue
        owner, _, id_text = reply_text(raw, f"ticket {key!r}").partition(" ")
        if not id_text.isdigit():
            raise StoreError(f"Corrupted ticket {key!r} in the store")
        found = messages_between(pipe, keys, owner, int(id_text) - 1, int(id_text))
        if len(found) != 1:
            raise StoreError(f"Corrupted ticket {key!r} in the store: its message is missing")
        stored[key] = found[0]
    return stored


def messages_between(
    client: Any, keys: RedisKeys, uuid: str, after_id: int, up_to_id: int | None
) -> list[MessageRecord]:
    """The agent's messages with after_id < id <= up_to_id, read by `client` (or a pipe)."""
    upper = "+inf" if up_to_id is None else up_to_id
    rows = client.zrangebyscore(keys.messages(uuid), f"({after_id}", upper, withscores=True)
    return [stored_message(raw, score, uuid) for raw, score in rows]
