"""The `Store` protocol: what the supervisor may ask of its store, whatever the backend.

Contract only; the shared logic is in core.py and the backends in sqlite.py and redis.py.
Every method is a plain, fast sync call except `lease`, an async context manager.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

from grove.supervisor.store.batch_steps import BatchStepBook
from grove.supervisor.store.kinds import CLEAR_KIND as CLEAR_KIND
from grove.supervisor.store.kinds import COMPACTION_KIND as COMPACTION_KIND
from grove.supervisor.store.kinds import SPENT_KIND as SPENT_KIND
from grove.supervisor.store.lease import Lease
from grove.supervisor.store.records import AgentRecord, EventRecord, MessageRecord, NewMessage
from grove.supervisor.store.sizes import DEFAULT_MAX_MESSAGE_BYTES as DEFAULT_MAX_MESSAGE_BYTES

DEFAULT_LEASE_TTL_S = 10.0
DEFAULT_LEASE_POLL_S = 0.01


class Store(Protocol):
    """Agents, messages, events, focus, session leases and the trees live Groves hold. Writes
    either happen whole or raise StoreError and change nothing; reads validate every record
    and raise StoreError on one they cannot trust."""

    max_message_bytes: int
    # The steps on the batch tier and the provider batches they went in (SPEC 20).
    batch_steps: BatchStepBook

    def create_agents(
        self, records: Sequence[AgentRecord], messages: Sequence[NewMessage] = ()
    ) -> list[MessageRecord]:
        """Write all `records` (and their first `messages`) in ONE transaction. Refused whole
        when a uuid exists or repeats, a parent or watched agent is unknown (an agent of the
        same batch counts when it comes earlier), or a fork point lies after the last message."""
        ...

    def get_agent(self, uuid: str) -> AgentRecord | None: ...

    def get_agents(self, uuids: Collection[str]) -> dict[str, AgentRecord]:
        """The records of those of `uuids` that exist (whole uuids, not prefixes), in one
        read."""
        ...

    def resolve_agent(self, prefix: str, *, include_ended: bool = True) -> AgentRecord:
        """The one agent whose uuid is `prefix` or starts with it; CommandError otherwise."""
        ...

    def list_agents(
        self, include_ended: bool = False, *, unreadable: list[str] | None = None
    ) -> list[AgentRecord]:
        """Agents in creation order; only running ones unless `include_ended`. A record that
        cannot be read is a StoreError, or, given an `unreadable` list, skipped with its error
        text appended there."""
        ...

    def children(self, uuid: str, created_since: float | None = None) -> list[AgentRecord]:
        """Direct children of `uuid` (any status), in creation order; with `created_since`,
        only those created then or later."""
        ...

    def update_agent(self, uuid: str, **changes: Any) -> AgentRecord:
        """The record with `changes` applied, validated and stored. uuid, parent_uuid, role,
        fork_message_id and created_at never change."""
        ...

    def append_message(
        self,
        agent_uuid: str,
        kind: str,
        content: str,
        data: dict[str, Any] | None = None,
        ticket: str | None = None,
    ) -> MessageRecord:
        """Store one message under the next global id. A ticket already stored for this agent
        returns that message and writes nothing (for another agent: StoreError)."""
        ...

    def append_messages(self, messages: Sequence[NewMessage]) -> list[MessageRecord]:
        """`append_message` for many, in one transaction, results in input order."""
        ...

    def agent_messages(
        self, uuid: str, after_id: int = 0, up_to_id: int | None = None
    ) -> list[MessageRecord]:
        """The agent's own messages with after_id < id <= up_to_id, by id."""
        ...

    def newest_messages(self, uuid: str, count: int) -> list[MessageRecord]:
        """The agent's own `count` newest messages (fewer when it holds fewer), by id: what
        the end of its conversation holds, read without its whole history."""
        ...

    def message_counts(self, uuids: Collection[str]) -> dict[str, int]:
        """How many own messages each agent holds (0 for none), without reading them."""
        ...

    def last_message_id(self) -> int:
        """The highest message id of the whole store, 0 when it holds none."""
        ...

    def conversation(self, uuid: str, *, compacted: bool = True) -> list[MessageRecord]:
        """Ancestors' messages up to each fork point (recursively), then the agent's own,
        cut after the most recent `clear` of that sequence (the clear itself excluded); when
        a `compaction` is newer than any `clear`: that message, then the messages from its
        `first_kept_message_id` on (other compactions left out). `compacted=False` ignores
        compactions: the whole history since the last `clear`."""
        ...

    def conversation_end(self, uuid: str) -> int:
        """Id of the last message `conversation(uuid)` holds, 0 when it holds none: where a
        child forked now branches off. Reads no message content."""
        ...

    def append_event(self, kind: str, payload: dict[str, Any]) -> EventRecord: ...

    def append_events(self, events: Sequence[tuple[str, dict[str, Any]]]) -> list[EventRecord]:
        """`(kind, payload)` events appended in order in one write; none when one is invalid."""
        ...

    def log_events(self, events: Sequence[tuple[str, dict[str, Any]]]) -> None:
        """`append_events` for a writer that does not read them back (the event log)."""
        ...

    def events(self, after_id: int = 0, limit: int = 1000) -> list[EventRecord]:
        """Events with id > after_id, oldest first, at most `limit`."""
        ...

    def last_event_id(self) -> int:
        """The id of the newest event ever appended (trimmed or not), 0 when none was."""
        ...

    def wait_events(self, after_id: int, timeout_s: float, limit: int = 1000) -> list[EventRecord]:
        """Like `events`, but blocks up to `timeout_s` until there is at least one (else [])."""
        ...

    def trim_events(self, before: float) -> int:
        """Delete the events made before `before` (a Unix time); how many went."""
        ...

    def set_focus(self, root_uuid: str, agent_uuid: str) -> None: ...

    def get_focus(self, root_uuid: str) -> str | None: ...

    def lease(self, session_id: str, timeout_s: float) -> AbstractAsyncContextManager[Lease]:
        """Hold the session's lease: FIFO across processes; SupervisorError after `timeout_s`."""
        ...

    def renew_holder(self, holder: str, ttl_s: float) -> bool:
        """The Grove `holder` (a supervisor) is alive for `ttl_s` seconds more; whether it was
        alive until now. One not renewed in time is gone, and the trees it held with it."""
        ...

    def drop_holder(self, holder: str) -> None:
        """The Grove `holder` ends: it holds no tree any more."""
        ...

    def hold_trees(self, holder: str, roots: Collection[str]) -> None:
        """The Grove `holder` holds the trees of these root uuids now (whoever held them)."""
        ...

    def live_holders(self) -> set[str]:
        """The holders renewed in time and not dropped."""
        ...

    def tree_holders(self) -> dict[str, str]:
        """Root uuid -> holder, for every tree a live holder holds."""
        ...

    def close(self) -> None: ...
