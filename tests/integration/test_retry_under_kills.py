"""Retries of batch turns under repeated host kills, over a real Ray: `wait_any` never takes a
turn awaiting its retry for finished, a fork onto a host just killed still runs every child, and
a replacement killed while it takes the turns over hands them on to the next one.
"""

from __future__ import annotations

import time

import pytest

from grove.supervisor import Grove
from grove.supervisor.store import Store
from tests.integration.host_kills import (
    conversation,
    events,
    finish_all,
    kill_host,
    wait_for_event,
)

MAX_RESTARTS = 50  # every test here kills hosts; none is meant to be given up on
pytestmark = pytest.mark.grove(env={"GROVE_HOSTS__MAX_RESTARTS": str(MAX_RESTARTS)})


def conversation_kinds(store: Store, agent: str) -> list[str]:
    return [m.kind for m in conversation(store, agent)]


def test_wait_any_does_not_take_a_turn_awaiting_its_retry_for_finished(
    grove: Grove, store: Store
) -> None:
    """While the turns of a killed host wait for their retry, other turns keep finishing and
    wake `wait_any`: it must report each child once, with its real result, never as ended
    without one (a batch would record such a task as failed although it still runs)."""
    root = grove.create_root("claude-haiku-4-5").uuid
    long = [f"[[sim tps=20 tokens=60]] long {index}" for index in range(40)]
    # finishing one after another from 1.5 s to 5.5 s, while the long ones wait for their retry
    short = [f"[[sim ttft_ms={1500 + 25 * i} tokens=2]] short {i}" for i in range(160)]
    children = grove.fork_many(root, long + short)
    time.sleep(1.0)
    kill_host(grove, grove.provider_identity(children[0])["host"])
    results = finish_all(grove, children)
    unfinished = [child for child, result in results.items() if result is None or not result.ok]
    assert not unfinished, f"{len(unfinished)} children reported without their answer"
    for child in children:
        assert conversation_kinds(store, child) == ["user", "assistant"]


def test_fork_many_onto_a_host_just_killed_runs_every_child(grove: Grove, store: Store) -> None:
    """A host killed just before a keyed batch fork reaches it: the call returns the children
    instead of failing them all (they run on the replacement, each stored once)."""
    root = grove.create_root("gpt-5-mini").uuid
    prompts = [f"[[sim tokens=5]] right after the kill {index}" for index in range(40)]
    kill_host(grove, "host-1")
    children = grove.fork_many(root, prompts)
    results = finish_all(grove, children)
    assert all(result is not None and result.ok for result in results.values())
    for child in children:
        assert conversation_kinds(store, child) == ["user", "assistant"]


def test_a_host_killed_again_while_its_turns_are_retried(grove: Grove, store: Store) -> None:
    """The replacement of a killed host is killed too while it takes the interrupted turns
    over: they are retried once more, on the next replacement, and each still ends ok with
    exactly one stored answer."""
    root = grove.create_root("claude-haiku-4-5").uuid
    prompts = [f"[[sim tps=20 tokens=40]] twice interrupted {index}" for index in range(80)]
    children = grove.fork_many(root, prompts)
    victim = grove.provider_identity(children[0])["host"]
    restarts = len(events(store, "HostRestarted"))
    time.sleep(1.0)
    kill_host(grove, victim)
    wait_for_event(store, "HostRestarted", restarts + 1)
    kill_host(grove, victim)
    results = finish_all(grove, children)
    failed = {str(r.error if r else None) for r in results.values() if not (r and r.ok)}
    assert not failed
    for child in children:
        assert conversation_kinds(store, child) == ["user", "assistant"]
