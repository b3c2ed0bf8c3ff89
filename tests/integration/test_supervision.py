"""Host supervision over a real Ray: a host killed with SIGKILL mid-turn is replaced, its
interrupted turns are reported and resumed (stored exactly once), and a host that
keeps dying is given up on after the restart intensity, with an event and a clear error.
"""

from __future__ import annotations

import time

import pytest
import ray

from grove.supervisor import Grove
from grove.supervisor.errors import SupervisorError
from grove.supervisor.store import Store
from tests.integration.host_kills import (
    conversation,
    events,
    finish_all,
    kill_host,
    wait_for_event,
)

MAX_RESTARTS = 2
pytestmark = pytest.mark.grove(env={"GROVE_HOSTS__MAX_RESTARTS": str(MAX_RESTARTS)})


def test_sigkill_of_a_host_during_40_turns(grove: Grove, store: Store) -> None:
    root = grove.create_root("claude-haiku-4-5").uuid
    prompts = [f"[[sim tps=20 tokens=80]] task {index}" for index in range(40)]
    children = grove.fork_many(root, prompts)
    lonely = grove.create_root("gpt-5-nano").uuid  # a turn its caller reads: resumed too
    placed = {grove.provider_identity(c)["host"] for c in children[:4]}
    assert placed == {"host-0", "host-1"}
    time.sleep(1.5)
    victim = grove.provider_identity(children[0])["host"]
    turn = grove.send(lonely, "[[sim tps=10 tokens=40]] long")  # as long as a child's
    lonely_host = grove.provider_identity(lonely)["host"]
    kill_host(grove, victim)
    wait_for_event(store, "HostRestarted", 1)
    results = finish_all(grove, children)
    assert all(result is not None and result.ok for result in results.values())
    for child, prompt in zip(children, prompts, strict=True):
        own = conversation(store, child)
        assert [(m.kind, m.content) for m in own[:1]] == [("user", prompt)]  # acknowledged, kept
        assert [m.kind for m in own[1:]] == ["assistant"]  # exactly one stored result
    interrupted = {str(e["agent"]) for e in events(store, "TurnInterrupted")}
    assert interrupted and interrupted <= set(children) | {lonely}
    outcome = turn.result(60)
    assert outcome.ok, outcome.error  # on the victim, it resumed on the new host
    assert [m.kind for m in conversation(store, lonely)] == ["user", "assistant"]
    if lonely_host == victim:
        assert lonely in interrupted
    assert grove.ask(lonely, "after the restart").ok  # rebuilt from the store


def test_a_host_that_keeps_dying_is_given_up(grove: Grove, store: Store) -> None:
    agent = grove.create_root("gpt-5-mini").uuid
    assert grove.ask(agent, "hello").ok
    host = grove.provider_identity(agent)["host"]
    restarted_before = len([e for e in events(store, "HostRestarted") if e["host"] == host])
    allowed = MAX_RESTARTS - restarted_before
    for count in range(1, allowed + 1):
        kill_host(grove, host)
        deadline = time.monotonic() + 60
        while len([e for e in events(store, "HostRestarted") if e["host"] == host]) < (
            restarted_before + count
        ):
            assert time.monotonic() < deadline
            time.sleep(0.1)
    kill_host(grove, host)
    wait_for_event(store, "HostGivenUp", 1)
    (given_up,) = events(store, "HostGivenUp")
    assert given_up["host"] == host
    with pytest.raises(SupervisorError) as info:
        grove.send(agent, "are you there")
    assert f"Host {host} died {MAX_RESTARTS + 1} times within 60 s" in str(info.value)
    other = grove.create_root("gpt-5-mini").uuid  # new agents go to the hosts still alive
    assert grove.ask(other, "still serving").ok


def test_supervisor_killed_mid_batch_loses_and_doubles_nothing(grove: Grove, store: Store) -> None:
    root = grove.create_root("gemini-3.0-flash").uuid
    # Half the jobs take four times as long (4.8 s against 1.2 s): the kill finds them in
    # flight, however slow the machine (jobs all of one length may all end together before
    # it); those in flight run again after the restart, so their length is what it waits.
    prompts = [
        f"[[sim tps=25 tokens={30 * (1 + 3 * (index % 2))}]] job {index}" for index in range(24)
    ]
    children = grove.fork_many(root, prompts)
    first = grove.wait_any(children, 60)
    assert 0 < len(first) < len(children)  # some finished before the kill, the rest are in flight
    ray.kill(grove.supervisor, no_restart=False)
    rest = [child for child in children if child not in first]
    results = first | finish_all(grove, rest)  # waits out the supervisor's restart
    failures = {r.error if r is not None else None for r in results.values() if not (r and r.ok)}
    assert not failures
    assert sorted(c.uuid for c in store.children(root)) == sorted(children)  # none doubled
    for child, prompt in zip(children, prompts, strict=True):
        own = store.agent_messages(child)
        assert [(m.kind, m.content) for m in own[:1]] == [("user", prompt)]
        assert [m.kind for m in own[1:]] == ["assistant"]
    again = grove.fork_many(root, ["[[sim tokens=3]] after"], keys=["after-key"])
    assert grove.fork_many(root, ["[[sim tokens=3]] after"], keys=["after-key"]) == again
    assert events(store, "SupervisorStarted")  # the restarted supervisor was called since
