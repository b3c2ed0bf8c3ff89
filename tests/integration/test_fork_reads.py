"""What a fork reads of its parent's conversation: where a child branches off (`fork_end`) and
how long its inherited prefix is (`ConversationTokens`), counted by a real redis-server's own
byte counter, so a parent's long history is not read again for each fork."""

from __future__ import annotations

import time
import uuid as uuid_module
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from grove.actors.transcript import parts_to_data
from grove.providers.base import TextPart, ToolCallPart, ToolResultPart
from grove.supervisor.context import message_tokens
from grove.supervisor.prefixes import ConversationTokens
from grove.supervisor.store import AgentRecord, Store, open_store
from grove.supervisor.turns import NEWEST_READ, fork_end

HISTORY = 200
MESSAGE_CHARS = 2000
HISTORY_BYTES = HISTORY * MESSAGE_CHARS
# What a read may cost that does not depend on the history: a few messages and the replies.
FEW_BYTES = HISTORY_BYTES // 10


@pytest.fixture
def redis_store(redis_url: str) -> Iterator[tuple[Store, redis.Redis]]:
    store = open_store(f"{redis_url}?namespace=fork-reads-{uuid_module.uuid4().hex[:12]}")
    counters = redis.Redis.from_url(redis_url)
    try:
        yield store, counters
    finally:
        counters.close()
        store.close()


@pytest.fixture(params=("sqlite", "redis"))
def any_store(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[Store]:
    if request.param == "sqlite":
        store = open_store(f"sqlite:///{tmp_path / 'grove.sqlite3'}")
    else:
        base = request.getfixturevalue("redis_url")
        store = open_store(f"{base}?namespace=fork-reads-{uuid_module.uuid4().hex[:12]}")
    try:
        yield store
    finally:
        store.close()


def sent_bytes(counters: redis.Redis) -> int:
    """Everything the server has sent its clients so far (its own INFO counter)."""
    return int(counters.info("stats")["total_net_output_bytes"])


def long_parent(store: Store) -> AgentRecord:
    """A root holding HISTORY messages of MESSAGE_CHARS, as after a long working session."""
    parent = AgentRecord(uuid=str(uuid_module.uuid4()), role="root", created_at=time.time())
    store.create_agents([parent])
    kinds = ("user", "assistant")
    for index in range(HISTORY):
        store.append_message(parent.uuid, kinds[index % 2], "x" * MESSAGE_CHARS)
    return parent


def call(call_id: str) -> ToolCallPart:
    return ToolCallPart(call_id=call_id, name="lookup", arguments={"key": call_id}, signature=None)


def result(call_id: str) -> ToolResultPart:
    return ToolResultPart(call_id=call_id, name="lookup", content="3 in stock", is_error=False)


def add(store: Store, parent: AgentRecord, kind: str, parts: list[Any]) -> int:
    return store.append_message(parent.uuid, kind, "", {"parts": parts_to_data(parts)}).id


def test_where_a_fork_branches_off_is_found_without_reading_the_parents_history(
    redis_store: tuple[Store, redis.Redis],
) -> None:
    store, counters = redis_store
    parent = long_parent(store)
    before = sent_bytes(counters)
    assert fork_end(store, parent) == store.last_message_id()
    assert sent_bytes(counters) - before < FEW_BYTES


def test_a_tool_loop_longer_than_the_first_read_still_branches_off_before_its_open_step(
    any_store: Store,
) -> None:
    store = any_store
    parent = long_parent(store)
    before_step = store.last_message_id()
    calls = [f"c{number}" for number in range(3 * NEWEST_READ)]
    add(store, parent, "assistant", [call(call_id) for call_id in calls])
    for call_id in calls[:-1]:  # one result a message; the last call still runs
        add(store, parent, "tool_result", [result(call_id)])
        assert fork_end(store, parent) == before_step
    whole = add(store, parent, "tool_result", [result(calls[-1])])
    assert fork_end(store, parent) == whole
    answer = add(store, parent, "assistant", [TextPart(text="done")])
    assert fork_end(store, parent) == answer


def test_a_parent_whose_only_messages_are_an_open_step_branches_off_at_its_own_fork_point(
    any_store: Store,
) -> None:
    store = any_store
    root = AgentRecord(uuid=str(uuid_module.uuid4()), role="root", created_at=time.time())
    store.create_agents([root])
    point = store.append_message(root.uuid, "user", "go").id
    child = AgentRecord(
        uuid=str(uuid_module.uuid4()),
        role="child",
        parent_uuid=root.uuid,
        fork_message_id=point,
        created_at=time.time(),
    )
    store.create_agents([child])
    calls = [f"c{number}" for number in range(NEWEST_READ)]
    add(store, child, "assistant", [call(call_id) for call_id in calls])
    for call_id in calls[:-1]:  # NEWEST_READ messages in all: the first read holds them all
        add(store, child, "tool_result", [result(call_id)])
    assert fork_end(store, child) == point


def test_a_parents_tokens_are_counted_again_from_the_messages_since_only(
    redis_store: tuple[Store, redis.Redis],
) -> None:
    store, counters = redis_store
    parent = long_parent(store)
    tokens = ConversationTokens()
    assert tokens.count(store, parent.uuid) == whole_count(store, parent.uuid)
    store.append_message(parent.uuid, "user", "one more question")
    expected = whole_count(store, parent.uuid)
    before = sent_bytes(counters)
    counted = tokens.count(store, parent.uuid)
    assert sent_bytes(counters) - before < FEW_BYTES
    assert counted == expected


def whole_count(store: Store, uuid: str) -> int:
    return sum(message_tokens(message) for message in store.conversation(uuid))


def test_a_parents_token_count_follows_its_conversation_through_clears_and_compactions(
    any_store: Store,
) -> None:
    store = any_store
    root = AgentRecord(uuid=str(uuid_module.uuid4()), role="root", created_at=time.time())
    store.create_agents([root])
    tokens = ConversationTokens(capacity=1)
    assert tokens.count(store, root.uuid) == 0
    first = store.append_message(root.uuid, "user", "a question " * 40)
    add(store, root, "assistant", [call("a")])
    add(store, root, "tool_result", [result("a")])
    assert tokens.count(store, root.uuid) == whole_count(store, root.uuid) > 0
    store.append_message(
        root.uuid,
        "compaction",
        "summary",
        data={"first_kept_message_id": first.id, "tokens_before": 900, "tokens_after": 90},
    )
    store.append_message(root.uuid, "assistant", "after the summary")
    assert tokens.count(store, root.uuid) == whole_count(store, root.uuid)
    store.append_message(root.uuid, "clear", "")
    assert tokens.count(store, root.uuid) == 0 == whole_count(store, root.uuid)
    store.append_message(root.uuid, "user", "afresh")
    assert tokens.count(store, root.uuid) == whole_count(store, root.uuid) > 0
    other = AgentRecord(uuid=str(uuid_module.uuid4()), role="root", created_at=time.time())
    store.create_agents([other])
    store.append_message(other.uuid, "user", "elsewhere")
    assert tokens.count(store, other.uuid) == whole_count(store, other.uuid)  # root let go
    store.append_message(root.uuid, "assistant", "still counted right")
    assert tokens.count(store, root.uuid) == whole_count(store, root.uuid)
    child = AgentRecord(
        uuid=str(uuid_module.uuid4()),
        role="child",
        parent_uuid=root.uuid,
        fork_message_id=store.last_message_id(),
        created_at=time.time(),
    )
    store.create_agents([child])  # a child holding nothing yet counts what it inherits
    assert tokens.count(store, child.uuid) == whole_count(store, root.uuid)
    store.append_message(child.uuid, "user", "its own")
    assert tokens.count(store, child.uuid) == whole_count(store, child.uuid)


def test_a_fork_branches_off_where_its_parents_conversation_ends(any_store: Store) -> None:
    store = any_store
    root = AgentRecord(uuid=str(uuid_module.uuid4()), role="root", created_at=time.time())
    store.create_agents([root])
    assert fork_end(store, root) == 0  # nothing to inherit yet
    point = store.append_message(root.uuid, "user", "go").id
    child = AgentRecord(
        uuid=str(uuid_module.uuid4()),
        role="child",
        parent_uuid=root.uuid,
        fork_message_id=point,
        created_at=time.time(),
    )
    store.create_agents([child])
    assert fork_end(store, child) == point == store.conversation_end(child.uuid)
    store.append_message(child.uuid, "clear", "")
    assert fork_end(store, child) == 0 == store.conversation_end(child.uuid)
    own = store.append_message(child.uuid, "user", "afresh").id
    assert fork_end(store, child) == own == store.conversation_end(child.uuid)
