"""The store's book of steps on the batch tier (SPEC 20), one suite against SQLite on a temp
file and a real redis-server: kept across connections, replaced by step, dropped; bad input
refused whole; a damaged record a clear StoreError.
"""

from __future__ import annotations

import time

import pytest

from grove.supervisor.errors import StoreError
from grove.supervisor.store import Store
from grove.supervisor.store.batch_steps import BatchStepRecord
from tests.integration.test_store_contract import Backend, backend, store

__all__ = ["backend", "store"]  # the contract suite's fixtures, used here too

ACCOUNT = "0f" * 8


def step(number: int, **fields: object) -> BatchStepRecord:
    values: dict[str, object] = {
        "step": f"{number:032x}",
        "agent": f"agent-{number}",
        "provider": "anthropic",
        "account": ACCOUNT,
        "attempt": 1,
        "batch_id": None,
        "sent_at": time.time(),
    }
    return BatchStepRecord.model_validate(values | fields)


def test_steps_are_kept_replaced_and_dropped(backend: Backend, store: Store) -> None:
    first, second, third = step(1), step(2), step(3, provider="openai")
    store.batch_steps.put([second, first])
    store.batch_steps.put([third])
    sent = first.model_copy(update={"batch_id": "msgbatch_01", "attempt": 2})
    store.batch_steps.put([sent])  # the same step again: replaced
    other = backend.open()  # another connection (a restarted supervisor) reads the same
    assert other.batch_steps.all() == [sent, second, third]
    assert sent.custom_id == f"{1:032x}-2"
    other.batch_steps.drop([second.step, "ab" * 16])  # an unknown step is ignored
    assert store.batch_steps.all() == [sent, third]
    store.batch_steps.drop([])
    store.batch_steps.put([])
    assert [record.step for record in store.batch_steps.all()] == [sent.step, third.step]


def test_bad_steps_are_refused_whole(store: Store) -> None:
    kept = step(1)
    store.batch_steps.put([kept])
    with pytest.raises(StoreError, match="given twice; nothing was written"):
        store.batch_steps.put([step(2), step(2)])
    unchecked = BatchStepRecord.model_construct(**{**step(3).model_dump(), "step": "NOT HEX"})
    with pytest.raises(StoreError, match="Invalid batch step: step: String should match"):
        store.batch_steps.put([step(4), unchecked])
    assert store.batch_steps.all() == [kept]


def test_a_damaged_step_is_a_clear_store_error(backend: Backend, store: Store) -> None:
    kept = step(1)
    store.batch_steps.put([kept])
    named = f"{2:032x}"
    body = step(3).model_dump_json()  # a body that names another step
    if backend.name == "sqlite":
        backend.raw_execute("INSERT INTO batch_steps (step, body) VALUES (?, ?)", named, body)
    else:
        client = backend.raw_redis()
        client.hset(f"{backend.namespace}:batch_steps", named, body)
        client.close()
    with pytest.raises(StoreError, match=f"Corrupted batch step {named} in the store: it names"):
        store.batch_steps.all()
    store.batch_steps.drop([named])
    if backend.name == "sqlite":
        backend.raw_execute("UPDATE batch_steps SET body = '{not json' WHERE step = ?", kept.step)
    else:
        client = backend.raw_redis()
        client.hset(f"{backend.namespace}:batch_steps", kept.step, b"\x80\xff")
        client.close()
    with pytest.raises(StoreError, match=f"Corrupted batch step {kept.step} in the store"):
        store.batch_steps.all()
