"""Retries of batch turns under repeated host kills, over a real Ray: `wait_any` never takes a
turn awaiting its retry for finished, a fork onto a host just killed still runs every child, and
a replacement killed while it takes the turns over hands them on to the next one.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator

import pytest

from actors.agent import TurnResult
from supervisor import Grove
from supervisor.config import load_settings
from supervisor.store import Store, open_store

MAX_RESTARTS = 50  # every test here kills hosts; none is meant to be given up on


@pytest.fixture(scope="module")
def store_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    return f"sqlite:///{tmp_path_factory.mktemp('retries') / 'grove.sqlite3'}"


@pytest.fixture(scope="module")
def grove(store_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Grove]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GROVE_CONFIG_FILE", str(tmp_path_factory.mktemp("cfg") / "none.toml"))
        patch.setenv("GROVE_HOSTS__MAX_RESTARTS", str(MAX_RESTARTS))
        settings = load_settings(store=store_url)
    with Grove(settings=settings, simulate=True, hosts=2) as running:
        yield running


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    opened = open_store(store_url)
    yield opened
    opened.close()


def events(store: Store, kind: str) -> list[dict[str, object]]:
    return [e.payload for e in store.events(limit=100_000) if e.kind == kind]


def kill_host(grove: Grove, host_id: str) -> None:
    os.kill(grove.host_pids()[host_id], signal.SIGKILL)


def wait_for_event(store: Store, kind: str, count: int, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while len(events(store, kind)) < count:
        assert time.monotonic() < deadline, f"fewer than {count} {kind} events"
        time.sleep(0.1)


def finish_all(grove: Grove, children: list[str]) -> dict[str, TurnResult | None]:
    """Wait for every child with `wait_any`, as the batch runner does; each one's result."""
    pending: set[str] = set(children)
    results: dict[str, TurnResult | None] = {}
    while pending:
        done = grove.wait_any(sorted(pending), 120)
        assert done, "children stopped finishing"
        results.update(done)
        pending -= done.keys()
    return results


def test_wait_any_does_not_take_a_turn_awaiting_its_retry_for_finished(
    grove: Grove, store: Store
) -> None:
    """While the turns of a killed host wait for their retry, other turns keep finishing and
    wake `wait_any`: it must report each child once, with its real result, never as ended
    without one (a batch would record such a task as failed although it still runs)."""
    root = grove.create_root("claude-haiku-4-5").uuid
    long = [f"[[sim tps=20 tokens=60]] long {index}" for index in range(100)]
    short = [f"[[sim ttft_ms={1500 + 10 * i} tokens=2]] short {i}" for i in range(400)]
    children = grove.fork_many(root, long + short, retry_interrupted=True)
    time.sleep(1.0)
    kill_host(grove, grove.provider_identity(children[0])["host"])
    results = finish_all(grove, children)
    unfinished = [child for child, result in results.items() if result is None or not result.ok]
    assert not unfinished, f"{len(unfinished)} children reported without their answer"
    for child in children:
        assert [m.kind for m in store.agent_messages(child)] == ["user", "assistant"]


def test_fork_many_onto_a_host_just_killed_runs_every_child(grove: Grove, store: Store) -> None:
    """A host killed just before a keyed batch fork reaches it: the call returns the children
    instead of failing them all (they run on the replacement, each stored once)."""
    root = grove.create_root("gpt-5-mini").uuid
    prompts = [f"[[sim tokens=5]] right after the kill {index}" for index in range(40)]
    kill_host(grove, "host-1")
    children = grove.fork_many(root, prompts, retry_interrupted=True)
    results = finish_all(grove, children)
    assert all(result is not None and result.ok for result in results.values())
    for child in children:
        assert [m.kind for m in store.agent_messages(child)] == ["user", "assistant"]


def test_a_host_killed_again_while_its_turns_are_retried(grove: Grove, store: Store) -> None:
    """The replacement of a killed host is killed too while it takes the interrupted turns
    over: they are retried once more, on the next replacement, and each still ends ok with
    exactly one stored answer."""
    root = grove.create_root("claude-haiku-4-5").uuid
    prompts = [f"[[sim tps=20 tokens=40]] twice interrupted {index}" for index in range(200)]
    children = grove.fork_many(root, prompts, retry_interrupted=True)
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
        assert [m.kind for m in store.agent_messages(child)] == ["user", "assistant"]
