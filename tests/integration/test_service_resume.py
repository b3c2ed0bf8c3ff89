"""Durable turns in the service: a batch goes on through a restart of the service (killed with
SIGKILL mid-batch), each task finished once and no side effect repeated, its `grove batch`
following it there to its end.
"""

from __future__ import annotations

import collections
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from server.client import healthy
from server.files import read_state
from supervisor.store import open_store
from supervisor.turns import calls_tools
from tests.conftest import free_loopback_port
from tests.integration.groves import cli_environment
from tests.integration.host_kills import events
from tests.integration.test_durable_turns import SLOW_LABEL, three_calls, wait_for_label

MARK = "tests.integration.test_durable_turns:mark"
START_S = 180


def started_service(base: Path, env: dict[str, str], port: int) -> subprocess.Popen[bytes]:
    """The service's own process (what `grove up` starts in the background), once it answers."""
    with (base / "service.log").open("ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "server.main", "--simulate", "--port", str(port)],
            env=env, cwd=base, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    deadline = time.monotonic() + START_S
    while (state := read_state(base / "config" / "grove")) is None or state.pid != process.pid:
        assert process.poll() is None, (base / "service.log").read_text()[-2000:]
        assert time.monotonic() < deadline, "the service did not start"
        time.sleep(0.2)
    assert healthy(state)
    return process


@contextmanager
def stopped_at_the_end(*processes: list[subprocess.Popen[bytes]]) -> Iterator[None]:
    """Whatever happens, the processes in these lists are stopped (SIGTERM, then SIGKILL)."""
    try:
        yield
    finally:
        for process in [process for started in processes for process in started]:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(60)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


def ids(path: Path) -> list[object]:
    return [json.loads(line)["id"] for line in path.read_text().splitlines()]


def test_a_batch_goes_on_through_a_restart_of_the_service(tmp_path: Path) -> None:
    """Two quick tasks are recorded, two tasks calling a side-effecting tool three times are
    in flight (the first in its second call) and two wait when the service is SIGKILLed.
    Started again, it runs the rest from its records and the store: the cut-off turns resume
    from their last stored step, and `grove batch` follows the batch to its end."""
    env = cli_environment(tmp_path)
    port = free_loopback_port()
    effects = [tmp_path / f"effects{n}.txt" for n in range(4)]
    tasks: list[dict[str, object]] = [
        {"id": f"q{n}", "prompt": f"[[sim tokens=3]] quick {n}"} for n in range(2)
    ]
    tasks += [{"id": n, "prompt": three_calls("mark", path)} for n, path in enumerate(effects)]
    tasks_file = tmp_path / "tasks.jsonl"
    tasks_file.write_text("".join(json.dumps(task) + "\n" for task in tasks))
    batch = [sys.executable, "-m", "cli.entry", "batch", str(tasks_file)]
    options = ["--model", "claude-haiku-4-5", "--tools", MARK, "-c", "2"]
    services: list[subprocess.Popen[bytes]] = []
    followers: list[subprocess.Popen[bytes]] = []
    with stopped_at_the_end(followers, services):
        services.append(started_service(tmp_path, env, port))
        follower = subprocess.Popen(
            [*batch, *options], env=env, cwd=tmp_path,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        followers.append(follower)
        wait_for_label(effects[0], SLOW_LABEL)
        services[0].kill()  # SIGKILL: the service's Ray goes with it
        services[0].wait()
        (output,) = (tmp_path / "config" / "grove" / "batches").glob("*[0-9a-f].jsonl")
        assert 2 <= len(ids(output)) < len(tasks)  # the quick ones at least, not the rest
        assert follower.poll() is None  # still following, through the outage
        services.append(started_service(tmp_path, env, port))
        stdout, stderr = follower.communicate(timeout=240)
    assert follower.returncode == 0, stderr.decode()
    assert stdout.decode().startswith("Batch finished: 6 ok, 0 failed"), stdout
    expected = sorted(str(task["id"]) for task in tasks)
    assert sorted(map(str, ids(tmp_path / "tasks.out.jsonl"))) == expected  # each once
    assert sorted(map(str, ids(output))) == expected
    for path in effects:
        assert path.read_text().split() == ["1", "2", "3"]  # no side effect repeated
    store = open_store(env["GROVE_STORE"])
    try:
        children: collections.Counter[str] = collections.Counter()
        answers: collections.Counter[str] = collections.Counter()
        for agent in store.list_agents(include_ended=True):
            if "key" in agent.metadata:
                children[agent.metadata["key"]] += 1
                final = [m for m in store.agent_messages(agent.uuid) if m.kind == "assistant"]
                answers[agent.metadata["key"]] += sum(not calls_tools(m.data) for m in final)
        assert len(children) == len(tasks) and set(children.values()) == {1}
        assert set(answers.values()) == {1}  # each task answered once, across both services
        cut_off = [e for e in events(store, "ToolInterrupted") if e["tool"] == "mark"]
        assert cut_off  # the first task's second call at least: it resumed after it
    finally:
        store.close()
