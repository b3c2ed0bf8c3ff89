"""`RedisStore`: the store for clusters: JSON values, per-agent sorted sets, an event stream.
Its commands only: connection, keys, scripts, values and leases live in the redis_*.py beside it.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from functools import partial
from typing import Any, cast

from grove.supervisor.errors import StoreError
from grove.supervisor.store.base import (
    DEFAULT_LEASE_POLL_S,
    DEFAULT_LEASE_TTL_S,
    DEFAULT_MAX_MESSAGE_BYTES,
)
from grove.supervisor.store.batch_steps import BatchStepBook
from grove.supervisor.store.codec import encode_json, validate_record
from grove.supervisor.store.core import StoreCore, read_or_note
from grove.supervisor.store.lease import LeaseQueue
from grove.supervisor.store.records import AgentRecord, EventRecord, MessageRecord
from grove.supervisor.store.redis_batch_steps import RedisBatchSteps
from grove.supervisor.store.redis_connection import RedisConnection
from grove.supervisor.store.redis_keys import RedisKeys
from grove.supervisor.store.redis_leases import RedisLeaseQueue
from grove.supervisor.store.redis_scripts import (
    APPEND_EVENTS,
    DROP_HOLDER,
    LIVE_HOLDERS,
)
from grove.supervisor.store.redis_values import (
    event_from_entry,
    reply_integer,
    reply_text,
    stored_message,
)
from grove.supervisor.store.redis_writes import messages_between, write_agents_and_messages
from grove.supervisor.store.write_checks import PreparedEvent, PreparedMessage

DEFAULT_NAMESPACE = "grove"
_MGET_CHUNK = 500
_TRIM_SCAN = 1000  # events read at a time while looking for where a trim cuts


class RedisStore(StoreCore):
    """The Store on a Redis server (redis:// or rediss://, optional user and password)."""

    def __init__(
        self,
        url: str,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        lease_ttl_s: float = DEFAULT_LEASE_TTL_S,
        lease_poll_s: float = DEFAULT_LEASE_POLL_S,
        socket_timeout_s: float = 10.0,
    ) -> None:
        super().__init__(max_message_bytes=max_message_bytes, lease_poll_s=lease_poll_s)
        self._conn = RedisConnection(url, socket_timeout_s)
        self._keys = RedisKeys(namespace)
        self._known_agents: set[str] = set()
        self._leases = RedisLeaseQueue(self._conn, self._keys, lease_ttl_s)
        self.batch_steps: BatchStepBook = RedisBatchSteps(self._conn, self._keys.batch_steps)

    @property
    def _lease_queue(self) -> LeaseQueue:
        return self._leases

    def close(self) -> None:
        self._conn.close()

    # ----- agents ---------------------------------------------------------------------------

    def get_agent(self, uuid: str) -> AgentRecord | None:
        with self._conn.mapped("read an agent"):
            raw = self._conn.client.get(self._keys.agent(uuid))
        return None if raw is None else self._agent(uuid, raw)

    def get_agents(self, uuids: Collection[str]) -> dict[str, AgentRecord]:
        wanted = list(uuids)
        if not wanted:
            return {}
        with self._conn.mapped("read agents"):
            found = self._conn.client.mget([self._keys.agent(uuid) for uuid in wanted])
        return {
            uuid: self._agent(uuid, raw)
            for uuid, raw in zip(wanted, found, strict=True)
            if raw is not None
        }

    def list_agents(
        self, include_ended: bool = False, *, unreadable: list[str] | None = None
    ) -> list[AgentRecord]:
        with self._conn.mapped("list agents"):
            uuids = [
                reply_text(raw, "agent index")
                for raw in self._conn.client.zrange(self._keys.agent_index, 0, -1)
            ]
        agents = self._agents(uuids, unreadable)
        return [agent for agent in agents if include_ended or agent.status == "running"]

    def children(self, uuid: str, created_since: float | None = None) -> list[AgentRecord]:
        with self._conn.mapped("list children"):
            members = self._conn.client.smembers(self._keys.children(uuid))
        found = self._agents([reply_text(raw, f"children of {uuid}") for raw in members])
        if created_since is None:
            return found
        return [child for child in found if child.created_at >= created_since]

    def _agents_with_prefix(self, prefix: str, limit: int) -> list[AgentRecord]:
        low = b"[" + prefix.encode()
        high = b"(" + prefix.encode() + b"\xff"
        with self._conn.mapped("resolve an agent prefix"):
            found = self._conn.client.zrangebylex(
                self._keys.agent_index, low, high, start=0, num=limit
            )
        agents = self._agents([reply_text(raw, "agent index") for raw in found])
        return sorted(agents, key=lambda agent: agent.uuid)

    def _agents(
        self, uuids: Sequence[str], unreadable: list[str] | None = None
    ) -> list[AgentRecord]:
        """Records of indexed agents in creation order; an indexed agent without one is corrupt.
        With `unreadable`, a corrupt one is noted there and left out (see `list_agents`)."""
        agents = []
        for start in range(0, len(uuids), _MGET_CHUNK):
            chunk = uuids[start : start + _MGET_CHUNK]
            with self._conn.mapped("read agents"):
                raws = self._conn.client.mget([self._keys.agent(uuid) for uuid in chunk])
            for uuid, raw in zip(chunk, raws, strict=True):
                record = read_or_note(partial(self._indexed_agent, uuid, raw), unreadable)
                if record is not None:
                    agents.append(record)
        return sorted(agents, key=lambda agent: (agent.created_at, agent.uuid))

    def _indexed_agent(self, uuid: str, raw: bytes | str | None) -> AgentRecord:
        if raw is None:
            raise StoreError(f"Corrupted agent index in the store: {uuid!r} has no record")
        return self._agent(uuid, raw)

    def _agent(self, uuid: str, raw: bytes | str) -> AgentRecord:
        record = validate_record(AgentRecord, raw, f"agent record {uuid!r}")
        if record.uuid != uuid:
            raise StoreError(
                f"Corrupted agent record {uuid!r} in the store: it names {record.uuid}"
            )
        return record

    def _existing_agent_ids(self, uuids: Collection[str]) -> set[str]:
        unknown = [uuid for uuid in uuids if uuid not in self._known_agents]
        if unknown:
            with self._conn.mapped("look up agents"):
                scores = self._conn.client.zmscore(self._keys.agent_index, unknown)
            self._known_agents.update(
                uuid for uuid, score in zip(unknown, scores, strict=True) if score is not None
            )
        return {uuid for uuid in uuids if uuid in self._known_agents}

    def message_counts(self, uuids: Collection[str]) -> dict[str, int]:
        wanted = list(uuids)
        with self._conn.mapped("count messages"):
            pipe = self._conn.client.pipeline(transaction=False)
            for uuid in wanted:
                pipe.zcard(self._keys.messages(uuid))
            counts = pipe.execute()
        return {uuid: int(count) for uuid, count in zip(wanted, counts, strict=True)}

    def _replace_agent(self, record: AgentRecord) -> None:
        value = encode_json(record.model_dump(), f"Record of agent {record.uuid}")
        with self._conn.mapped("update an agent"):
            if not self._conn.client.set(self._keys.agent(record.uuid), value, xx=True):
                raise StoreError(f"Unknown agent {record.uuid}; nothing was written")

    def _write_focus(self, root_uuid: str, agent_uuid: str) -> None:
        with self._conn.mapped("set the focus"):
            self._conn.client.hset(self._keys.focus, root_uuid, agent_uuid)

    def get_focus(self, root_uuid: str) -> str | None:
        with self._conn.mapped("read the focus"):
            raw = self._conn.client.hget(self._keys.focus, root_uuid)
        return None if raw is None else reply_text(raw, f"focus of session {root_uuid}")

    # ----- messages -------------------------------------------------------------------------

    def _write(
        self, records: Sequence[AgentRecord], messages: Sequence[PreparedMessage]
    ) -> list[MessageRecord]:
        written = write_agents_and_messages(self._conn, self._keys, records, messages)
        self._known_agents.update(record.uuid for record in records)
        return written

    def agent_messages(
        self, uuid: str, after_id: int = 0, up_to_id: int | None = None
    ) -> list[MessageRecord]:
        with self._conn.mapped("read messages"):
            return messages_between(self._conn.client, self._keys, uuid, after_id, up_to_id)

    def newest_messages(self, uuid: str, count: int) -> list[MessageRecord]:
        if count < 1:
            return []
        with self._conn.mapped("read messages"):
            rows: Any = self._conn.client.zrange(
                self._keys.messages(uuid), -count, -1, withscores=True
            )
        return [stored_message(raw, score, uuid) for raw, score in rows]

    def _last_own_message(self, uuid: str, up_to_id: int | None) -> tuple[int, str] | None:
        upper = "+inf" if up_to_id is None else up_to_id
        with self._conn.mapped("read the last message"):
            rows: Any = self._conn.client.zrevrangebyscore(
                self._keys.messages(uuid), upper, "-inf", start=0, num=1, withscores=True
            )
        if not rows:
            return None
        raw, score = rows[0]
        record = stored_message(raw, score, uuid)
        return record.id, record.kind

    def last_message_id(self) -> int:
        with self._conn.mapped("read the last message id"):
            raw = self._conn.client.get(self._keys.message_seq)
        return 0 if raw is None else reply_integer(raw, "message id counter")

    # ----- events ---------------------------------------------------------------------------

    def _write_events(self, events: Sequence[PreparedEvent]) -> list[int]:
        bodies = []
        for event in events:
            head = encode_json({"kind": event.kind, "created_at": event.created_at}, "event")
            bodies.append(head[:-1] + ',"payload":' + event.payload_json + "}")
        with self._conn.mapped("append events"):
            last_id = self._conn.client.eval(
                APPEND_EVENTS, 2, self._keys.events, self._keys.event_seq, *bodies
            )
        first_id = int(cast(int, last_id)) - len(bodies) + 1
        return list(range(first_id, first_id + len(bodies)))

    def events(self, after_id: int = 0, limit: int = 1000) -> list[EventRecord]:
        with self._conn.mapped("read events"):
            entries: Any = self._conn.client.xrange(
                self._keys.events, f"{after_id + 1}-0", "+", count=limit
            )
        return [event_from_entry(entry_id, fields) for entry_id, fields in entries]

    def last_event_id(self) -> int:
        with self._conn.mapped("read the last event id"):
            raw = self._conn.client.get(self._keys.event_seq)
        return 0 if raw is None else reply_integer(raw, "event id counter")

    def trim_events(self, before: float) -> int:
        """Events are kept in id order, which is the order they were made in: the first one
        made at or after `before` is found from the oldest on, and the stream cut there."""
        after, keep_from = 0, None
        while keep_from is None:
            batch = self.events(after, _TRIM_SCAN)
            if not batch:
                break
            keep_from = next((e.id for e in batch if e.created_at >= before), None)
            after = batch[-1].id
        with self._conn.mapped("trim events"):
            if keep_from is None:  # every event is older
                return int(self._conn.client.xtrim(self._keys.events, maxlen=0, approximate=False))
            cut = f"{keep_from}-0"
            return int(self._conn.client.xtrim(self._keys.events, minid=cut, approximate=False))

    def wait_events(self, after_id: int, timeout_s: float, limit: int = 1000) -> list[EventRecord]:
        remaining_ms = int(timeout_s * 1000)
        # Each XREAD BLOCK must end well before the socket timeout does.
        margin_s = min(1.0, self._conn.socket_timeout_s / 2)
        slice_ms = max(1, int((self._conn.socket_timeout_s - margin_s) * 1000))
        while remaining_ms > 0:
            block_ms = min(remaining_ms, slice_ms)
            with self._conn.mapped("wait for events"):
                reply: Any = self._conn.client.xread(
                    {self._keys.events: f"{after_id}-0"}, count=limit, block=block_ms
                )
            if reply:
                return [event_from_entry(entry_id, fields) for entry_id, fields in reply[0][1]]
            remaining_ms -= block_ms
        return self.events(after_id, limit)

    # ----- holders: each one's key expires unless renewed (the server's clock) ----------------

    def _renew_holder(self, holder: str, ttl_s: float) -> bool:
        self.live_holders()  # lets go of what expired holders held
        key = f"{self._keys.holder_prefix}{holder}"
        with self._conn.mapped("renew a holder"):
            pipe = self._conn.client.pipeline(transaction=True)
            pipe.exists(key)
            pipe.set(key, "1", px=max(1, int(ttl_s * 1000)))
            pipe.sadd(self._keys.holders, holder)
            alive = pipe.execute()[0]
        return bool(alive)

    def _drop_holder(self, holder: str) -> None:
        keys = [self._keys.holds, self._keys.holders]
        self._conn.run("drop a holder", DROP_HOLDER, keys, self._keys.holder_prefix, holder)

    def _hold_trees(self, holder: str, roots: Sequence[str]) -> None:
        with self._conn.mapped("hold trees"):
            pipe = self._conn.client.pipeline(transaction=True)
            pipe.hset(self._keys.holds, mapping=dict.fromkeys(roots, holder))
            pipe.sadd(f"{self._keys.holder_prefix}{holder}:trees", *roots)
            pipe.execute()

    def live_holders(self) -> set[str]:
        keys = [self._keys.holds, self._keys.holders]
        live = self._conn.run("read the holders", LIVE_HOLDERS, keys, self._keys.holder_prefix)
        return {reply_text(raw, "holder") for raw in live}

    def tree_holders(self) -> dict[str, str]:
        live = self.live_holders()
        with self._conn.mapped("read the held trees"):
            raw = self._conn.client.hgetall(self._keys.holds)
        held = {
            reply_text(root, "held root"): reply_text(holder, "holder")
            for root, holder in raw.items()
        }
        return {root: holder for root, holder in held.items() if holder in live}
