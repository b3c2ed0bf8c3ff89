"""Grove's store: agents, messages, events, focus and session leases on SQLite or Redis.

Only the supervisor touches the store. Public names are re-exported here; their homes are the
modules named below.
"""

from supervisor.store.base import Store
from supervisor.store.factory import default_store_url, exposed_store_warning, open_store
from supervisor.store.lease import Lease
from supervisor.store.records import AgentRecord, EventRecord, MessageRecord, NewMessage
from supervisor.store.redis import RedisStore
from supervisor.store.sqlite import SqliteStore

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
]
