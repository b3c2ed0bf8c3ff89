"""`grove batch` killed halfway (SIGKILL) and run again: the rest completes, and no task is run
twice to completion (a task finished but not yet recorded is taken from the store).
"""

from __future__ import annotations

import collections
import subprocess
import sys
import time
from pathlib import Path

from grove.supervisor.store import open_store
from tests.integration.groves import invoke
from tests.integration.shared_ray import SHARED_RAY
from tests.integration.test_batch_cli import make_workspace, write_tasks

TASKS = 40


def test_kill_halfway_then_rerun(tmp_path: Path) -> None:
    work = make_workspace(tmp_path)
    write_tasks(
        work.tasks,
        [{"id": n, "prompt": f"[[sim tps=10 tokens=20]] task {n}"} for n in range(TASKS)],
    )
    SHARED_RAY.ensure()  # for the rerun (started by a module before, in a whole run)
    arguments = [str(work.tasks), "--model", "gpt-5-mini", "--simulate", "--concurrency", "10"]
    first = subprocess.Popen(
        [sys.executable, "-m", "grove.cli.app", "batch", *arguments],
        env=work.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while not work.output.exists() or len(work.output.read_text().splitlines()) < 12:
            assert first.poll() is None, "the batch ended before it could be killed"
            assert time.monotonic() < deadline
            time.sleep(0.2)
    finally:
        first.kill()
        first.wait()
    written = len(work.output.read_text().splitlines())
    assert 12 <= written < TASKS
    # The rerun runs in this process: it makes a supervisor of its own in the shared Ray, as
    # a rerun in a new process makes its own.
    second = invoke(work.env, "batch", *arguments)
    assert second.returncode == 0, second.stderr
    last = {record["id"]: record["status"] for record in work.records()}
    assert last == {n: "ok" for n in range(TASKS)}
    store = open_store(work.store_url)
    answers: collections.Counter[str] = collections.Counter()
    for agent in store.list_agents(include_ended=True):
        key = agent.metadata.get("key")
        if key is not None:
            answers[key] += sum(m.kind == "assistant" for m in store.agent_messages(agent.uuid))
    assert len(answers) == TASKS
    assert set(answers.values()) == {1}  # every task answered exactly once, across both runs
