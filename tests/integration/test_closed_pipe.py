"""Printing commands into a pipe whose reader has gone: exit 141, nothing on stderr, as
`grove events | head -1` (a real `head`) and the help printed while the arguments are read.

No Ray: these commands read the store or the catalog (the served and run cases are in
test_one_path.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from grove.supervisor.store import open_store

TIMEOUT_S = 60
EXIT_BROKEN_PIPE = 141
# Far more than a pipe holds (64 KiB on Linux) plus what `head` reads at once: the command
# is still writing when `head` leaves, whatever the scheduling.
EVENT_LOG_BYTES = 1024 * 1024


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "GROVE_CONFIG_FILE": str(tmp_path / "none.toml"),
        "GROVE_STORE": f"sqlite:///{tmp_path / 'grove.sqlite3'}",
        "GROVE_NO_SERVICE": "1",
    }


def closed_pipe(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """`grove ARGS` with its stdout a pipe nobody reads any more."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run(
            [sys.executable, "-m", "grove.cli.entry", *args], stdout=write, stderr=subprocess.PIPE,
            text=True, env=env, timeout=TIMEOUT_S, check=False,
        )  # fmt: skip
    finally:
        os.close(write)


@pytest.mark.parametrize("args", [["--help"], ["run", "--help"], ["models"], ["models", "--json"]])
def test_help_and_the_catalog_end_quietly_on_a_closed_pipe(
    args: list[str], env: dict[str, str]
) -> None:
    done = closed_pipe(env, *args)
    assert (done.returncode, done.stderr) == (EXIT_BROKEN_PIPE, "")


def test_grove_events_into_head_exits_141(env: dict[str, str]) -> None:
    """`grove events | head -1` through a shell, with more events than the pipe holds."""
    store = open_store(env["GROVE_STORE"])
    padding = "x" * 1000
    count = EVENT_LOG_BYTES // len(padding)
    store.append_events([("note", {"n": n, "padding": padding}) for n in range(count)])
    pipeline = "set -o pipefail; grove events | head -1"
    script = f'grove() {{ "{sys.executable}" -m grove.cli.entry "$@"; }}; {pipeline}'
    done = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, env=env, timeout=TIMEOUT_S,
        check=False,
    )  # fmt: skip
    assert done.returncode == EXIT_BROKEN_PIPE, done.stderr
    assert done.stderr == ""
    first = json.loads(done.stdout)
    assert (first["id"], first["kind"], first["payload"]["n"]) == (1, "note", 0)
