"""Grove's store: agents, messages, events, focus and session leases on SQLite or Redis.

Only the supervisor touches the store. Public names are re-exported here; their homes are the
modules named below.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from grove.supervisor.store.base import Store
    from grove.supervisor.store.factory import (
        default_store_url,
        exposed_store_warning,
        open_store,
        store_files,
    )
    from grove.supervisor.store.lease import Lease
    from grove.supervisor.store.records import AgentRecord, EventRecord, MessageRecord, NewMessage
    from grove.supervisor.store.redis import RedisStore
    from grove.supervisor.store.sqlite import SqliteStore

# Each name's home, imported on first use (a command that only reads a constant of
# supervisor.store.base does not load the Redis client).
_HOMES = {
    "Store": "base",
    "default_store_url": "factory",
    "exposed_store_warning": "factory",
    "open_store": "factory",
    "store_files": "factory",
    "Lease": "lease",
    "AgentRecord": "records",
    "EventRecord": "records",
    "MessageRecord": "records",
    "NewMessage": "records",
    "RedisStore": "redis",
    "SqliteStore": "sqlite",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'grove.supervisor.store' has no attribute {name!r}")
    return getattr(import_module(f"grove.supervisor.store.{home}"), name)


__all__ = [
    "AgentRecord",
    "EventRecord",
    "Lease",
    "MessageRecord",
    "NewMessage",
    "RedisStore",
    "SqliteStore",
    "Store",
    "default_store_url",
    "exposed_store_warning",
    "open_store",
    "store_files",
]
