"""`StoreCore`: the rules both stores share (prefix resolution, fork assembly, holders, leases)
over storage primitives that sqlite.py and redis.py implement; no SQLite or Redis calls here.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

from pydantic import ValidationError

from grove.supervisor.errors import CommandError, StoreError
from grove.supervisor.store.base import CLEAR_KIND, COMPACTION_KIND
from grove.supervisor.store.codec import decode_json, describe
from grove.supervisor.store.lease import HeldLease, Lease, LeaseQueue
from grove.supervisor.store.records import (
    IMMUTABLE_AGENT_FIELDS,
    AgentRecord,
    EventRecord,
    MessageRecord,
    NewMessage,
)
from grove.supervisor.store.write_checks import (
    PreparedEvent,
    PreparedMessage,
    check_encodable,
    checked_id,
    prepare_event,
    prepare_messages,
    revalidate_agent,
)

# How many candidates an ambiguous prefix lists.
_AMBIGUOUS_SHOWN = 10


class StoreCore(ABC):
    """Shared half of every store; see base.Store for the contract of each public method."""

    def __init__(self, *, max_message_bytes: int, lease_poll_s: float) -> None:
        if max_message_bytes < 1:
            raise StoreError("max_message_bytes must be positive")
        self.max_message_bytes = max_message_bytes
        self._lease_poll_s = lease_poll_s

    # ----- storage primitives ---------------------------------------------------------------

    @abstractmethod
    def _existing_agent_ids(self, uuids: Collection[str]) -> set[str]:
        """Which of `uuids` name stored agents."""

    @abstractmethod
    def _write(
        self, records: Sequence[AgentRecord], messages: Sequence[PreparedMessage]
    ) -> list[MessageRecord]:
        """Insert checked agents, then messages, in one transaction; ticket rules applied."""

    @abstractmethod
    def _replace_agent(self, record: AgentRecord) -> None:
        """Overwrite the stored record of an existing agent."""

    @abstractmethod
    def _agents_with_prefix(self, prefix: str, limit: int) -> list[AgentRecord]:
        """Up to `limit` agents whose uuid starts with `prefix`, by uuid."""

    @abstractmethod
    def _write_focus(self, root_uuid: str, agent_uuid: str) -> None: ...

    @property
    @abstractmethod
    def _lease_queue(self) -> LeaseQueue: ...

    @abstractmethod
    def get_agent(self, uuid: str) -> AgentRecord | None: ...

    @abstractmethod
    def get_agents(self, uuids: Collection[str]) -> dict[str, AgentRecord]: ...

    @abstractmethod
    def agent_messages(
        self, uuid: str, after_id: int = 0, up_to_id: int | None = None
    ) -> list[MessageRecord]: ...

    @abstractmethod
    def newest_messages(self, uuid: str, count: int) -> list[MessageRecord]: ...

    @abstractmethod
    def last_message_id(self) -> int: ...

    @abstractmethod
    def message_counts(self, uuids: Collection[str]) -> dict[str, int]: ...

    @abstractmethod
    def _last_own_message(self, uuid: str, up_to_id: int | None) -> tuple[int, str] | None:
        """(id, kind) of the agent's own newest message with id <= up_to_id (None: any)."""

    @abstractmethod
    def list_agents(
        self, include_ended: bool = False, *, unreadable: list[str] | None = None
    ) -> list[AgentRecord]: ...

    @abstractmethod
    def children(self, uuid: str, created_since: float | None = None) -> list[AgentRecord]: ...

    @abstractmethod
    def _write_events(self, events: Sequence[PreparedEvent]) -> list[int]:
        """Append checked events in one write; their new ids, in order."""

    @abstractmethod
    def events(self, after_id: int = 0, limit: int = 1000) -> list[EventRecord]: ...

    @abstractmethod
    def last_event_id(self) -> int: ...

    @abstractmethod
    def wait_events(
        self, after_id: int, timeout_s: float, limit: int = 1000
    ) -> list[EventRecord]: ...

    @abstractmethod
    def trim_events(self, before: float) -> int:
        """Delete the events made before `before` (a Unix time); how many went. The ids of
        those left, and of those to come, do not change."""

    @abstractmethod
    def get_focus(self, root_uuid: str) -> str | None: ...

    @abstractmethod
    def close(self) -> None: ...

    # ----- agents ---------------------------------------------------------------------------

    def create_agents(
        self, records: Sequence[AgentRecord], messages: Sequence[NewMessage] = ()
    ) -> list[MessageRecord]:
        checked = [revalidate_agent(record) for record in records]
        batch_ids: set[str] = set()
        referenced: set[str] = set()
        for record in checked:
            if record.uuid in batch_ids:
                raise StoreError(
                    f"Agent {record.uuid} appears twice in one batch; nothing was written"
                )
            for other in (record.parent_uuid, record.watched_uuid):
                if other is not None and other not in batch_ids:
                    referenced.add(other)
            batch_ids.add(record.uuid)
        message_owners = {message.agent_uuid for message in messages} - batch_ids
        existing = self._existing_agent_ids(batch_ids | referenced | message_owners)
        for record in checked:
            if record.uuid in existing:
                raise StoreError(f"Agent {record.uuid} already exists; nothing was written")
        for missing in sorted((referenced | message_owners) - existing):
            raise StoreError(f"Unknown agent {missing} named in a new batch; nothing was written")
        latest = self.last_message_id()
        for record in checked:
            if record.fork_message_id > latest:
                raise StoreError(
                    f"Agent {record.uuid} forks at message {record.fork_message_id}, after the "
                    f"last message {latest}; nothing was written"
                )
        return self._write(checked, prepare_messages(messages, self.max_message_bytes))

    def resolve_agent(self, prefix: str, *, include_ended: bool = True) -> AgentRecord:
        wanted = prefix.strip()
        if not wanted:
            raise CommandError("Agent id is empty: give a uuid or a unique prefix of one")
        exact = self.get_agent(wanted)
        if exact is not None and (include_ended or exact.status == "running"):
            return exact
        candidates = [
            agent
            for agent in self._agents_with_prefix(wanted, limit=_AMBIGUOUS_SHOWN + 1)
            if include_ended or agent.status == "running"
        ]
        if not candidates:
            raise CommandError(f"Unknown agent: {wanted}")
        if len(candidates) == 1:
            return candidates[0]
        shown = ", ".join(agent.uuid for agent in candidates[:_AMBIGUOUS_SHOWN])
        count = (
            f"more than {_AMBIGUOUS_SHOWN}"
            if len(candidates) > _AMBIGUOUS_SHOWN
            else str(len(candidates))
        )
        raise CommandError(f"Ambiguous agent prefix: {wanted} matches {count} agents: {shown}")

    def update_agent(self, uuid: str, **changes: Any) -> AgentRecord:
        frozen = sorted(changes.keys() & IMMUTABLE_AGENT_FIELDS)
        if frozen:
            raise StoreError(f"An agent's {', '.join(frozen)} cannot change; nothing was written")
        unknown = sorted(changes.keys() - AgentRecord.model_fields.keys())
        if unknown:
            raise StoreError(
                f"Agent records have no field {', '.join(unknown)}; nothing was written"
            )
        current = self._require_agent(uuid)
        try:
            updated = AgentRecord.model_validate(current.model_dump() | changes)
        except ValidationError as exc:
            raise StoreError(
                f"Invalid update of agent {uuid}: {describe(exc)}; nothing was written"
            ) from exc
        check_encodable(updated)
        watched = changes.get("watched_uuid")
        if watched is not None and not self._existing_agent_ids([watched]):
            raise StoreError(f"Unknown agent {watched} to watch; nothing was written")
        self._replace_agent(updated)
        return updated

    def set_focus(self, root_uuid: str, agent_uuid: str) -> None:
        missing = sorted(
            {root_uuid, agent_uuid} - self._existing_agent_ids({root_uuid, agent_uuid})
        )
        if missing:
            raise StoreError(f"Cannot focus: unknown agent {missing[0]}; nothing was written")
        self._write_focus(root_uuid, agent_uuid)

    # ----- messages -------------------------------------------------------------------------

    def append_message(
        self,
        agent_uuid: str,
        kind: str,
        content: str,
        data: dict[str, Any] | None = None,
        ticket: str | None = None,
    ) -> MessageRecord:
        try:
            message = NewMessage(
                agent_uuid=agent_uuid, kind=kind, content=content, data=data or {}, ticket=ticket
            )
        except ValidationError as exc:
            raise StoreError(f"Invalid message: {describe(exc)}; nothing was written") from exc
        return self.append_messages([message])[0]

    def append_messages(self, messages: Sequence[NewMessage]) -> list[MessageRecord]:
        prepared = prepare_messages(messages, self.max_message_bytes)
        owners = {item.message.agent_uuid for item in prepared}
        missing = sorted(owners - self._existing_agent_ids(owners))
        if missing:
            raise StoreError(f"Unknown agent {missing[0]}: no message was written")
        return self._write([], prepared)

    def conversation(self, uuid: str, *, compacted: bool = True) -> list[MessageRecord]:
        """What the agent's model is sent, oldest first. A `clear` ends the view; after the
        newest `compaction` the view is that summary, the messages it kept (from
        `first_kept_message_id` on, wherever in the lineage) and what came after it.
        `compacted=False`: every message since the last `clear`, compactions in their place."""
        # Newest segment first, so a `clear` or a compaction's first kept message ends the walk.
        segments: list[list[MessageRecord]] = []
        compaction: MessageRecord | None = None
        first_kept = 0
        for agent, up_to in self._lineage(uuid):
            own = self.agent_messages(agent.uuid, up_to_id=up_to)
            if compaction is None:
                boundary = _last_boundary(own, compacted)
                if boundary is not None and own[boundary].kind == CLEAR_KIND:
                    segments.append(own[boundary + 1 :])
                    break
                if boundary is not None:
                    compaction = own[boundary]
                    # 0: it kept nothing; the view starts after the compaction
                    first_kept = int(compaction.data.get("first_kept_message_id") or 0)
                    first_kept = first_kept or compaction.id
            if compaction is None:
                segments.append(own)
                continue
            segments.append([m for m in own if m.id >= first_kept and m.kind != COMPACTION_KIND])
            if own and own[0].id <= first_kept:
                break  # the kept messages start in this segment
        ordered = [message for segment in reversed(segments) for message in segment]
        return [compaction, *ordered] if compaction is not None else ordered

    def conversation_end(self, uuid: str) -> int:
        # The newest message shown decides: a `clear` there leaves nothing to show.
        for agent, up_to in self._lineage(uuid):
            last = self._last_own_message(agent.uuid, up_to)
            if last is not None:
                message_id, kind = last
                return 0 if kind == CLEAR_KIND else message_id
        return 0

    def _lineage(self, uuid: str) -> Iterator[tuple[AgentRecord, int | None]]:
        """The agent, then each ancestor its conversation reaches into, with the last message
        id shown of it (None: all); ends at a root or at a fork made before any message."""
        agent = self._require_agent(uuid)
        up_to: int | None = None
        visited: set[str] = set()
        while True:
            if agent.uuid in visited:
                raise StoreError(
                    f"Corrupted agent tree in the store: {agent.uuid} is its own ancestor"
                )
            visited.add(agent.uuid)
            yield agent, up_to
            if agent.parent_uuid is None or agent.fork_message_id == 0:
                return
            up_to = agent.fork_message_id if up_to is None else min(up_to, agent.fork_message_id)
            agent = self._require_agent(agent.parent_uuid)

    # ----- events ---------------------------------------------------------------------------

    def append_event(self, kind: str, payload: dict[str, Any]) -> EventRecord:
        return self.append_events([(kind, payload)])[0]

    def append_events(self, events: Sequence[tuple[str, dict[str, Any]]]) -> list[EventRecord]:
        prepared = self._prepared_events(events)
        ids = self._write_events(prepared) if prepared else []
        return [
            EventRecord(
                id=event_id,
                kind=event.kind,
                payload=decode_json(event.payload_json, "event"),
                created_at=event.created_at,
            )
            for event_id, event in zip(ids, prepared, strict=True)
        ]

    def log_events(self, events: Sequence[tuple[str, dict[str, Any]]]) -> None:
        prepared = self._prepared_events(events)
        if prepared:
            self._write_events(prepared)

    def _prepared_events(self, events: Sequence[tuple[str, dict[str, Any]]]) -> list[PreparedEvent]:
        return [prepare_event(kind, payload, self.max_message_bytes) for kind, payload in events]

    # ----- leases ---------------------------------------------------------------------------

    def lease(self, session_id: str, timeout_s: float) -> AbstractAsyncContextManager[Lease]:
        return HeldLease(self._lease_queue, session_id, timeout_s, self._lease_poll_s)

    # ----- holders: the live Groves and the trees they hold ----------------------------------

    def renew_holder(self, holder: str, ttl_s: float) -> bool:
        if not (math.isfinite(ttl_s) and ttl_s > 0):
            raise StoreError(f"A holder's time to live must be positive, not {ttl_s!r}")
        return self._renew_holder(checked_id(holder, "holder"), ttl_s)

    def drop_holder(self, holder: str) -> None:
        self._drop_holder(checked_id(holder, "holder"))

    def hold_trees(self, holder: str, roots: Collection[str]) -> None:
        checked = [checked_id(root, "root") for root in roots]
        if checked:
            self._hold_trees(checked_id(holder, "holder"), checked)

    @abstractmethod
    def _renew_holder(self, holder: str, ttl_s: float) -> bool:
        """Keep `holder` alive `ttl_s` more, after letting go of what expired holders held;
        whether it was alive."""

    @abstractmethod
    def _drop_holder(self, holder: str) -> None: ...

    @abstractmethod
    def _hold_trees(self, holder: str, roots: Sequence[str]) -> None: ...

    @abstractmethod
    def live_holders(self) -> set[str]: ...

    @abstractmethod
    def tree_holders(self) -> dict[str, str]: ...

    # ----- helpers for the backends ---------------------------------------------------------

    def _require_agent(self, uuid: str) -> AgentRecord:
        agent = self.get_agent(uuid)
        if agent is None:
            raise StoreError(f"Unknown agent {uuid}")
        return agent


def read_or_note(
    read: Callable[[], AgentRecord], unreadable: list[str] | None
) -> AgentRecord | None:
    """`read()`'s record; when it is unreadable, its StoreError, or None with the error's text
    noted in `unreadable` (a listing that shows what it can)."""
    try:
        return read()
    except StoreError as exc:
        if unreadable is None:
            raise
        unreadable.append(str(exc))
        return None


def _last_boundary(messages: list[MessageRecord], compacted: bool) -> int | None:
    """The index of the newest `clear` (or, when `compacted`, `compaction`) message."""
    kinds = (CLEAR_KIND, COMPACTION_KIND) if compacted else (CLEAR_KIND,)
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].kind in kinds:
            return index
    return None
