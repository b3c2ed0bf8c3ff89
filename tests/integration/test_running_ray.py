"""A Grove in a process where Ray already runs: it joins the supervisor running there, or makes
one of its own and, its maker, stops it at close with its hosts, so the next Grove in that Ray
starts clean with its own settings and store.
"""

from __future__ import annotations

import time
from pathlib import Path

import ray

from grove.supervisor import Grove
from grove.supervisor.actor import NAMESPACE
from grove.supervisor.store import open_store
from tests.integration.groves import running_grove

MODEL = "claude-haiku-4-5"
GONE_WITHIN_S = 30.0


def named_actors() -> list[str]:
    """The live named actors of Grove's namespace, in the Ray this process runs in."""
    return sorted(
        actor["name"]
        for actor in ray.util.list_named_actors(all_namespaces=True)
        if actor["namespace"] == NAMESPACE
    )


def wait_until_none_named() -> list[str]:
    """Waits (a while at most) for the namespace to empty; what is still named in it."""
    deadline = time.monotonic() + GONE_WITHIN_S
    while (left := named_actors()) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def supervisor_pid(grove: Grove) -> int:
    pid: int = ray.get(grove.supervisor.ready.remote(), timeout=60)["pid"]
    return pid


def roots(grove: Grove) -> set[str]:
    store = open_store(grove.settings.store)
    try:
        return {agent.uuid for agent in store.list_agents()}
    finally:
        store.close()


def test_each_grove_in_a_running_ray_makes_its_own_supervisor_and_stops_it(
    tmp_path: Path,
) -> None:
    (tmp_path / "first").mkdir()
    (tmp_path / "second").mkdir()
    with running_grove(tmp_path / "first", hosts=1) as first:
        assert ray.is_initialized() and not first._started_ray  # the Ray was running
        made = first.create_root(MODEL).uuid
        assert len(first.host_pids()) == 1
        assert len(named_actors()) == 2  # the supervisor and its host
    assert wait_until_none_named() == []  # the supervisor went at close, its host with it
    with running_grove(tmp_path / "second", hosts=2) as second:
        assert len(second.host_pids()) == 2  # its own settings, not the first's
        second_root = second.create_root(MODEL).uuid
        assert roots(second) == {second_root}  # its own store
    assert roots(first) == {made}
    assert wait_until_none_named() == []


def test_a_grove_joins_the_supervisor_running_and_leaves_it_to_its_maker(
    tmp_path: Path,
) -> None:
    (tmp_path / "joining").mkdir()
    with running_grove(tmp_path, hosts=1) as maker:
        made_pid = supervisor_pid(maker)
        with running_grove(tmp_path / "joining", hosts=3) as joining:
            assert supervisor_pid(joining) == made_pid
            assert len(joining.host_pids()) == 1  # the maker's settings
            joined = joining.create_root(MODEL).uuid
        assert supervisor_pid(maker) == made_pid  # still up after the joiner closed
        assert joined in roots(maker)
    assert wait_until_none_named() == []
