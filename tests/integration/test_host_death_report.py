"""A host killed under `grove run`: the command's terminal shows Grove's one line about it and
none of Ray's report, which the raylet sends to the driver owning the host (the command).

The command joins this process's Ray (`--address`) and makes the supervisor and hosts there as
their driver; this process finds the host's pid through that supervisor and kills it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import ray

from grove.supervisor.actor import NAMESPACE, SUPERVISOR_NAME
from grove.supervisor.host_deaths import host_died_text
from tests.integration.groves import REPO_ROOT, cli_environment
from tests.integration.shared_ray import SHARED_RAY

TIMEOUT_S = 120
SLOW_REPLY = "[[sim tokens=300 tps=30]] tell me a story"  # about 10 s of streaming
# What Ray says of a dead worker, in the raylet's report or an actor's error.
RAY_TEXTS = ("(raylet)", "A worker died", "Worker exit type", "OOM", "ray.exceptions")


def test_grove_says_once_that_the_host_died_and_ray_says_nothing(tmp_path: Path) -> None:
    SHARED_RAY.ensure()
    env = {
        **cli_environment(tmp_path),
        **{key: value for key, value in os.environ.items() if key.startswith("RAY_")},
        "GROVE_NO_SERVICE": "1",
    }
    command = [
        sys.executable, "-m", "grove.cli.entry", "--address", ray.get_runtime_context().gcs_address,
        "run", "--simulate", "--model", "claude-sonnet-5-5", SLOW_REPLY,
    ]  # fmt: skip
    running = subprocess.Popen(
        command, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert running.stdout is not None
        assert running.stdout.read(8)  # the reply streams
        supervisor: Any = ray.get_actor(SUPERVISOR_NAME, namespace=NAMESPACE)  # untyped handle
        pids: dict[str, int] = ray.get(supervisor.host_pids.remote(), timeout=30)
        for pid in pids.values():
            os.kill(pid, signal.SIGKILL)  # the turn's host among them
        out, err = running.communicate(timeout=TIMEOUT_S)
    finally:
        if running.poll() is None:
            running.send_signal(signal.SIGINT)
            running.communicate(timeout=TIMEOUT_S)
    assert running.returncode == 0, err
    killed = host_died_text("Worker exit type: SYSTEM_ERROR")
    assert err.splitlines() == [killed]
    assert "killed" in killed
    for text in RAY_TEXTS:
        assert text not in out and text not in err, text


@pytest.mark.parametrize(
    ("report", "said"),
    [
        ("... Worker exit type: SYSTEM_ERROR Worker exit detail: ...", "killed or crashed"),
        ("... Worker exit type: NODE_OUT_OF_MEMORY ...", "ran low on memory"),
        ("Task was killed due to the node running low on memory.", "ran low on memory"),
        ("The actor died unexpectedly before finishing this task.", "host died;"),
    ],
)
def test_the_line_names_the_cause_ray_reports(report: str, said: str) -> None:
    text = host_died_text(report)
    assert text.startswith("the agent's host died") and said in text
    assert text.endswith("; the turn resumes on another host")
