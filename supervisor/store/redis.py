"""`RedisStore`: the store for clusters: JSON values, per-agent sorted sets, an event stream.

Only Redis commands, Lua scripts and reply decoding live here; the shared rules are in core.py.
The URL's password is used to connect and never appears in an error text.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from typing import Any, cast
from urllib.parse import unquote, urlsplit

import redis
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import AuthenticationError, RedisError, WatchError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.retry import Retry

from grove.supervisor.errors import StoreError
from grove.supervisor.store.base import (
    DEFAULT_LEASE_POLL_S,
    DEFAULT_LEASE_TTL_S,
    DEFAULT_MAX_MESSAGE_BYTES,
)
from grove.supervisor.store.codec import decode_json, encode_json, validate_record
from grove.supervisor.store.core import StoreCore, read_or_note
from grove.supervisor.store.lease import LeaseQueue
from grove.supervisor.store.records import AgentRecord, EventRecord, MessageRecord
from grove.supervisor.store.write_checks import PreparedEvent, PreparedMessage, ticketed

DEFAULT_NAMESPACE = "grove"
# A WATCHed write that another client keeps disturbing is retried this many times.
_WATCH_ATTEMPTS = 5
_MGET_CHUNK = 500
_TRIM_SCAN = 1000  # events read at a time while looking for where a trim cuts

# KEYS: id counter, the agent's message zset[, ticket key]. ARGV: message JSON without its id
# (an object with at least one member), agent uuid. The id is spliced in as the first member.
_APPEND_MESSAGE = """
local id = redis.call('INCR', KEYS[1])
local text = string.format('%d', id)
redis.call('ZADD', KEYS[2], id, '{"id":' .. text .. ',' .. string.sub(ARGV[1], 2))
if #KEYS == 3 then redis.call('SET', KEYS[3], ARGV[2] .. ' ' .. text) end
return id
"""
# KEYS: the event stream, the event id counter. ARGV: each event's JSON without its id.
# Returns the last id; the events hold consecutive ids, as the script runs atomically.
_APPEND_EVENTS = """
local id = 0
for _, body in ipairs(ARGV) do
  id = redis.call('INCR', KEYS[2])
  redis.call('XADD', KEYS[1], string.format('%d-0', id), 'e', body)
end
return id
"""
# head(): the oldest live ticket of the queue KEYS[1], dropping dead tickets from its front.
_QUEUE_HEAD = """
local function head()
  while true do
    local first = redis.call('ZRANGE', KEYS[1], 0, 0)
    if #first == 0 then return false end
    if redis.call('EXISTS', ARGV[1] .. first[1]) == 1 then return tonumber(first[1]) end
    redis.call('ZREM', KEYS[1], first[1])
  end
end
"""
# KEYS: the session queue, the ticket counter. ARGV: ticket key prefix, TTL in ms.
# Returns the new ticket and the queue's head after it was added.
_LEASE_TAKE = (
    _QUEUE_HEAD
    + """
local ticket = redis.call('INCR', KEYS[2])
redis.call('SET', ARGV[1] .. ticket, '1', 'PX', ARGV[2])
redis.call('ZADD', KEYS[1], ticket, ticket)
return {ticket, head()}
"""
)
# KEYS: the session queue. ARGV: ticket key prefix.
_LEASE_HEAD = _QUEUE_HEAD + "return head()"
# let_go(holder): drop a holder: the trees it holds (those no other holder took since), its
# set of them, its key, its place among the holders. KEYS: the holds hash, the holders set.
# ARGV: holder key prefix (the holder's key is prefix .. id, its trees' set prefix .. id ..
# ':trees').
_LET_GO = """
local function let_go(holder)
  local trees = ARGV[1] .. holder .. ':trees'
  for _, root in ipairs(redis.call('SMEMBERS', trees)) do
    if redis.call('HGET', KEYS[1], root) == holder then redis.call('HDEL', KEYS[1], root) end
  end
  redis.call('DEL', trees, ARGV[1] .. holder)
  redis.call('SREM', KEYS[2], holder)
end
"""
# The live holders (their key has not expired); those that expired are let go of here.
_LIVE_HOLDERS = (
    _LET_GO
    + """
local live = {}
for _, holder in ipairs(redis.call('SMEMBERS', KEYS[2])) do
  if redis.call('EXISTS', ARGV[1] .. holder) == 1 then table.insert(live, holder)
  else let_go(holder) end
end
return live
"""
)
# ARGV[2]: the holder to drop.
_DROP_HOLDER = _LET_GO + "let_go(ARGV[2])"


class _Keys:
    """Every key name of one namespace, in one place."""

    def __init__(self, namespace: str) -> None:
        self.ns = namespace
        self.agent_index = f"{namespace}:agents"
        self.message_seq = f"{namespace}:message:seq"
        self.events = f"{namespace}:events"
        self.event_seq = f"{namespace}:event:seq"
        self.focus = f"{namespace}:focus"
        self.lease_seq = f"{namespace}:lease:seq"
        self.holders = f"{namespace}:holders"
        self.holds = f"{namespace}:holds"
        self.holder_prefix = f"{namespace}:holder:"

    def agent(self, uuid: str) -> str:
        return f"{self.ns}:agent:{uuid}"

    def children(self, uuid: str) -> str:
        return f"{self.ns}:children:{uuid}"

    def messages(self, uuid: str) -> str:
        return f"{self.ns}:messages:{uuid}"

    def ticket(self, ticket: str) -> str:
        return f"{self.ns}:ticket:{ticket}"

    def lease_queue(self, session_id: str) -> str:
        return f"{self.ns}:lease:{session_id}:queue"

    def lease_ticket_prefix(self, session_id: str) -> str:
        return f"{self.ns}:lease:{session_id}:ticket:"


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
        parts = urlsplit(url)
        self._where = f"{parts.scheme}://{parts.hostname or 'localhost'}:{parts.port or 6379}"
        self._secret = unquote(parts.password) if parts.password else None
        self._socket_timeout_s = socket_timeout_s
        self._keys = _Keys(namespace)
        self._known_agents: set[str] = set()
        with self._mapped("connect"):
            try:
                self._client = redis.Redis.from_url(
                    url,
                    socket_timeout=socket_timeout_s,
                    socket_connect_timeout=min(socket_timeout_s, 5.0),
                )
            except ValueError as exc:
                raise StoreError(f"Invalid Redis store URL for {self._where}") from exc
            self._client.ping()
        # Reached once: from now on a Redis that goes away (restarted, a network blip) is waited
        # for, every command sent again until it answers or about half a minute has passed.
        # Writes that matter twice are keyed (a turn's messages by its ticket): a command sent
        # again after its answer was lost stores nothing twice.
        self._client.set_retry(Retry(ExponentialWithJitterBackoff(base=0.05, cap=2.0), 20))
        self._leases = _RedisLeaseQueue(self, lease_ttl_s)

    @contextmanager
    def _mapped(self, action: str) -> Iterator[None]:
        """The one boundary where redis-py errors become StoreError, secrets scrubbed."""
        try:
            yield
        except AuthenticationError as exc:
            raise StoreError(
                f"Redis at {self._where} refused the credentials of the store URL "
                "(wrong user name or password)"
            ) from exc
        except (RedisConnectionError, RedisTimeoutError) as exc:
            raise StoreError(
                f"Cannot reach Redis at {self._where} to {action}: {self._scrub(exc)}"
            ) from exc
        except RedisError as exc:
            raise StoreError(
                f"Redis at {self._where} failed to {action}: {self._scrub(exc)}"
            ) from exc

    def _scrub(self, exc: Exception) -> str:
        text = str(exc)
        return text.replace(self._secret, "***") if self._secret else text

    @property
    def _lease_queue(self) -> LeaseQueue:
        return self._leases

    def close(self) -> None:
        with self._mapped("close"):
            self._client.close()

    # ----- agents ---------------------------------------------------------------------------

    def get_agent(self, uuid: str) -> AgentRecord | None:
        with self._mapped("read an agent"):
            raw = self._client.get(self._keys.agent(uuid))
        return None if raw is None else self._agent(uuid, raw)

    def get_agents(self, uuids: Collection[str]) -> dict[str, AgentRecord]:
        wanted = list(uuids)
        if not wanted:
            return {}
        with self._mapped("read agents"):
            found = self._client.mget([self._keys.agent(uuid) for uuid in wanted])
        return {
            uuid: self._agent(uuid, raw)
            for uuid, raw in zip(wanted, found, strict=True)
            if raw is not None
        }

    def list_agents(
        self, include_ended: bool = False, *, unreadable: list[str] | None = None
    ) -> list[AgentRecord]:
        with self._mapped("list agents"):
            uuids = [
                _text(raw, "agent index")
                for raw in self._client.zrange(self._keys.agent_index, 0, -1)
            ]
        agents = self._agents(uuids, unreadable)
        return [agent for agent in agents if include_ended or agent.status == "running"]

    def children(self, uuid: str, created_since: float | None = None) -> list[AgentRecord]:
        with self._mapped("list children"):
            members = self._client.smembers(self._keys.children(uuid))
        found = self._agents([_text(raw, f"children of {uuid}") for raw in members])
        if created_since is None:
            return found
        return [child for child in found if child.created_at >= created_since]

    def _agents_with_prefix(self, prefix: str, limit: int) -> list[AgentRecord]:
        low = b"[" + prefix.encode()
        high = b"(" + prefix.encode() + b"\xff"
        with self._mapped("resolve an agent prefix"):
            found = self._client.zrangebylex(self._keys.agent_index, low, high, start=0, num=limit)
        agents = self._agents([_text(raw, "agent index") for raw in found])
        return sorted(agents, key=lambda agent: agent.uuid)

    def _agents(
        self, uuids: Sequence[str], unreadable: list[str] | None = None
    ) -> list[AgentRecord]:
        """Records of indexed agents in creation order; an indexed agent without one is corrupt.
        With `unreadable`, a corrupt one is noted there and left out (see `list_agents`)."""
        agents = []
        for start in range(0, len(uuids), _MGET_CHUNK):
            chunk = uuids[start : start + _MGET_CHUNK]
            with self._mapped("read agents"):
                raws = self._client.mget([self._keys.agent(uuid) for uuid in chunk])
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
            with self._mapped("look up agents"):
                scores = self._client.zmscore(self._keys.agent_index, unknown)
            self._known_agents.update(
                uuid for uuid, score in zip(unknown, scores, strict=True) if score is not None
            )
        return {uuid for uuid in uuids if uuid in self._known_agents}

    def message_counts(self, uuids: Collection[str]) -> dict[str, int]:
        wanted = list(uuids)
        with self._mapped("count messages"):
            pipe = self._client.pipeline(transaction=False)
            for uuid in wanted:
                pipe.zcard(self._keys.messages(uuid))
            counts = pipe.execute()
        return {uuid: int(count) for uuid, count in zip(wanted, counts, strict=True)}

    def _replace_agent(self, record: AgentRecord) -> None:
        value = encode_json(record.model_dump(), f"Record of agent {record.uuid}")
        with self._mapped("update an agent"):
            if not self._client.set(self._keys.agent(record.uuid), value, xx=True):
                raise StoreError(f"Unknown agent {record.uuid}; nothing was written")

    def _write_focus(self, root_uuid: str, agent_uuid: str) -> None:
        with self._mapped("set the focus"):
            self._client.hset(self._keys.focus, root_uuid, agent_uuid)

    def get_focus(self, root_uuid: str) -> str | None:
        with self._mapped("read the focus"):
            raw = self._client.hget(self._keys.focus, root_uuid)
        return None if raw is None else _text(raw, f"focus of session {root_uuid}")

    # ----- messages -------------------------------------------------------------------------

    def _write(
        self, records: Sequence[AgentRecord], messages: Sequence[PreparedMessage]
    ) -> list[MessageRecord]:
        agent_values = [
            (record, encode_json(record.model_dump(), f"Record of agent {record.uuid}"))
            for record in records
        ]
        bodies = [_message_body(item) for item in messages]
        with self._mapped("write agents and messages"):
            for _ in range(_WATCH_ATTEMPTS):
                try:
                    written = self._try_write(agent_values, messages, bodies)
                except WatchError:
                    continue
                self._known_agents.update(record.uuid for record in records)
                return written
        raise StoreError("Other writers kept changing the same records; nothing was written")

    def _try_write(
        self,
        agent_values: Sequence[tuple[AgentRecord, str]],
        messages: Sequence[PreparedMessage],
        bodies: Sequence[str],
    ) -> list[MessageRecord]:
        keys = self._keys
        agent_keys = [keys.agent(record.uuid) for record, _ in agent_values]
        ticket_keys = sorted(
            {keys.ticket(item.message.ticket) for item in messages if item.message.ticket}
        )
        with self._client.pipeline(transaction=True) as pipe:
            if agent_keys or ticket_keys:
                pipe.watch(*agent_keys, *ticket_keys)  # type: ignore[no-untyped-call]
            if agent_keys and pipe.exists(*agent_keys):
                raise StoreError("An agent of this batch already exists; nothing was written")
            prior = self._stored_tickets(pipe, ticket_keys)
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
                pipe.eval(_APPEND_MESSAGE, len(script_keys), *script_keys, body, message.agent_uuid)
                new_ids_at[slot] = queued
                queued += 1
            replies = pipe.execute()
        for slot, reply_index in new_ids_at.items():
            results[slot] = messages[slot].record(int(replies[reply_index]))
        for slot, first in same_as.items():
            results[slot] = results[first]
        return [result for result in results if result is not None]

    def _stored_tickets(self, pipe: Any, ticket_keys: Sequence[str]) -> dict[str, MessageRecord]:
        """The messages already stored under these ticket keys (read while WATCHing them)."""
        if not ticket_keys:
            return {}
        stored = {}
        for key, raw in zip(ticket_keys, pipe.mget(ticket_keys), strict=True):
            if raw is None:
                continue
            owner, _, id_text = _text(raw, f"ticket {key!r}").partition(" ")
            if not id_text.isdigit():
                raise StoreError(f"Corrupted ticket {key!r} in the store")
            found = self._messages_between(pipe, owner, int(id_text) - 1, int(id_text))
            if len(found) != 1:
                raise StoreError(f"Corrupted ticket {key!r} in the store: its message is missing")
            stored[key] = found[0]
        return stored

    def agent_messages(
        self, uuid: str, after_id: int = 0, up_to_id: int | None = None
    ) -> list[MessageRecord]:
        with self._mapped("read messages"):
            return self._messages_between(self._client, uuid, after_id, up_to_id)

    def _messages_between(
        self, client: Any, uuid: str, after_id: int, up_to_id: int | None
    ) -> list[MessageRecord]:
        upper = "+inf" if up_to_id is None else up_to_id
        rows = client.zrangebyscore(
            self._keys.messages(uuid), f"({after_id}", upper, withscores=True
        )
        return [_stored_message(raw, score, uuid) for raw, score in rows]

    def newest_messages(self, uuid: str, count: int) -> list[MessageRecord]:
        if count < 1:
            return []
        with self._mapped("read messages"):
            rows: Any = self._client.zrange(self._keys.messages(uuid), -count, -1, withscores=True)
        return [_stored_message(raw, score, uuid) for raw, score in rows]

    def _last_own_message(self, uuid: str, up_to_id: int | None) -> tuple[int, str] | None:
        upper = "+inf" if up_to_id is None else up_to_id
        with self._mapped("read the last message"):
            rows: Any = self._client.zrevrangebyscore(
                self._keys.messages(uuid), upper, "-inf", start=0, num=1, withscores=True
            )
        if not rows:
            return None
        raw, score = rows[0]
        record = _stored_message(raw, score, uuid)
        return record.id, record.kind

    def last_message_id(self) -> int:
        with self._mapped("read the last message id"):
            raw = self._client.get(self._keys.message_seq)
        return 0 if raw is None else _integer(raw, "message id counter")

    # ----- events ---------------------------------------------------------------------------

    def _write_events(self, events: Sequence[PreparedEvent]) -> list[int]:
        bodies = []
        for event in events:
            head = encode_json({"kind": event.kind, "created_at": event.created_at}, "event")
            bodies.append(head[:-1] + ',"payload":' + event.payload_json + "}")
        with self._mapped("append events"):
            last_id = self._client.eval(
                _APPEND_EVENTS, 2, self._keys.events, self._keys.event_seq, *bodies
            )
        first_id = int(cast(int, last_id)) - len(bodies) + 1
        return list(range(first_id, first_id + len(bodies)))

    def events(self, after_id: int = 0, limit: int = 1000) -> list[EventRecord]:
        with self._mapped("read events"):
            entries: Any = self._client.xrange(
                self._keys.events, f"{after_id + 1}-0", "+", count=limit
            )
        return [_event(entry_id, fields) for entry_id, fields in entries]

    def last_event_id(self) -> int:
        with self._mapped("read the last event id"):
            raw = self._client.get(self._keys.event_seq)
        return 0 if raw is None else _integer(raw, "event id counter")

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
        with self._mapped("trim events"):
            if keep_from is None:  # every event is older
                return int(self._client.xtrim(self._keys.events, maxlen=0, approximate=False))
            cut = f"{keep_from}-0"
            return int(self._client.xtrim(self._keys.events, minid=cut, approximate=False))

    def wait_events(self, after_id: int, timeout_s: float, limit: int = 1000) -> list[EventRecord]:
        remaining_ms = int(timeout_s * 1000)
        # Each XREAD BLOCK must end well before the socket timeout does.
        margin_s = min(1.0, self._socket_timeout_s / 2)
        slice_ms = max(1, int((self._socket_timeout_s - margin_s) * 1000))
        while remaining_ms > 0:
            block_ms = min(remaining_ms, slice_ms)
            with self._mapped("wait for events"):
                reply: Any = self._client.xread(
                    {self._keys.events: f"{after_id}-0"}, count=limit, block=block_ms
                )
            if reply:
                return [_event(entry_id, fields) for entry_id, fields in reply[0][1]]
            remaining_ms -= block_ms
        return self.events(after_id, limit)

    # ----- holders: each one's key expires unless renewed (the server's clock) ----------------

    def _renew_holder(self, holder: str, ttl_s: float) -> bool:
        self.live_holders()  # lets go of what expired holders held
        key = f"{self._keys.holder_prefix}{holder}"
        with self._mapped("renew a holder"):
            pipe = self._client.pipeline(transaction=True)
            pipe.exists(key)
            pipe.set(key, "1", px=max(1, int(ttl_s * 1000)))
            pipe.sadd(self._keys.holders, holder)
            alive = pipe.execute()[0]
        return bool(alive)

    def _drop_holder(self, holder: str) -> None:
        keys = [self._keys.holds, self._keys.holders]
        self._run("drop a holder", _DROP_HOLDER, keys, self._keys.holder_prefix, holder)

    def _hold_trees(self, holder: str, roots: Sequence[str]) -> None:
        with self._mapped("hold trees"):
            pipe = self._client.pipeline(transaction=True)
            pipe.hset(self._keys.holds, mapping=dict.fromkeys(roots, holder))
            pipe.sadd(f"{self._keys.holder_prefix}{holder}:trees", *roots)
            pipe.execute()

    def live_holders(self) -> set[str]:
        keys = [self._keys.holds, self._keys.holders]
        live = self._run("read the holders", _LIVE_HOLDERS, keys, self._keys.holder_prefix)
        return {_text(raw, "holder") for raw in live}

    def tree_holders(self) -> dict[str, str]:
        live = self.live_holders()
        with self._mapped("read the held trees"):
            raw = self._client.hgetall(self._keys.holds)
        held = {_text(root, "held root"): _text(holder, "holder") for root, holder in raw.items()}
        return {root: holder for root, holder in held.items() if holder in live}

    # ----- plumbing for the lease queue ------------------------------------------------------

    def _run(self, action: str, script: str, keys: Sequence[str], *args: Any) -> Any:
        with self._mapped(action):
            return self._client.eval(script, len(keys), *keys, *args)


class _RedisLeaseQueue:
    """Lease tickets as keys with a TTL plus one sorted set per session; an expired key is a
    dead holder's ticket. Expiry is the server's clock, so machines need not agree on time."""

    def __init__(self, store: RedisStore, ttl_s: float) -> None:
        self._store = store
        self._keys = store._keys
        self.ttl_s = ttl_s

    def take(self, session_id: str) -> tuple[int, int | None]:
        keys = [self._keys.lease_queue(session_id), self._keys.lease_seq]
        prefix = self._keys.lease_ticket_prefix(session_id)
        ticket, head = self._store._run(
            "take a lease ticket", _LEASE_TAKE, keys, prefix, self._ttl_ms
        )
        return int(ticket), int(head)

    def renew(self, session_id: str, ticket: int) -> bool:
        key = f"{self._keys.lease_ticket_prefix(session_id)}{ticket}"
        with self._store._mapped("renew a lease ticket"):
            return bool(self._store._client.pexpire(key, self._ttl_ms))

    def head(self, session_id: str) -> int | None:
        keys = [self._keys.lease_queue(session_id)]
        prefix = self._keys.lease_ticket_prefix(session_id)
        head = self._store._run("read the lease queue", _LEASE_HEAD, keys, prefix)
        return None if head is None else int(head)

    def release(self, session_id: str, ticket: int) -> None:
        with self._store._mapped("release a lease ticket"):
            pipe = self._store._client.pipeline(transaction=True)
            pipe.delete(f"{self._keys.lease_ticket_prefix(session_id)}{ticket}")
            pipe.zrem(self._keys.lease_queue(session_id), str(ticket))
            pipe.execute()

    @property
    def _ttl_ms(self) -> int:
        return max(1, int(self.ttl_s * 1000))


def _stored_message(raw: bytes, score: float, uuid: str) -> MessageRecord:
    """A message record read from an agent's sorted set, checked against its place there."""
    record = validate_record(MessageRecord, raw, f"message record {int(score)} of {uuid!r}")
    if record.id != int(score) or record.agent_uuid != uuid:
        raise StoreError(
            f"Corrupted message record {int(score)} of {uuid!r} in the store: "
            f"it claims id {record.id} of agent {record.agent_uuid}"
        )
    return record


def _message_body(item: PreparedMessage) -> str:
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


def _event(entry_id: bytes, fields: dict[bytes, bytes]) -> EventRecord:
    id_text, _, sequence = entry_id.decode("ascii", "replace").partition("-")
    what = f"event record {id_text}"
    body = decode_json(fields.get(b"e", b""), what)
    if sequence != "0" or not isinstance(body, dict):
        raise StoreError(f"Corrupted {what} in the store: not an event Grove wrote")
    return validate_record(EventRecord, {**body, "id": int(id_text)}, what)


def _text(raw: object, what: str) -> str:
    if isinstance(raw, str):
        return raw
    if not isinstance(raw, bytes):
        raise StoreError(f"Corrupted {what} in the store: not text")
    try:
        return raw.decode()
    except UnicodeDecodeError as exc:
        raise StoreError(f"Corrupted {what} in the store: not UTF-8 text") from exc


def _integer(raw: object, what: str) -> int:
    text = _text(raw, what)
    if not text.isdigit():
        raise StoreError(f"Corrupted {what} in the store: not a number")
    return int(text)
