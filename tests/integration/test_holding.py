"""Which agents run: a Grove holds the trees it makes or resumes while it lives; once it has
exited (closed, or gone in the middle of a turn) their agents show `stopped`, no turn of theirs
streams, and `grove chat --resume` runs them again.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from grove.supervisor.holding import HOLDER_TTL_S
from grove.supervisor.reads import StoreReads
from tests.integration.groves import cli_environment, invoke, running_grove

MODEL = "claude-haiku-4-5"
# A program that starts a slow child, says which when its turn streams, and exits when told,
# in the middle of that turn, without closing its Grove.
EXITS_MID_TURN = f"""
import sys
import time
from grove.supervisor import Grove

grove = Grove(simulate=True, hosts=1)
grove.start()
root = grove.create_root("{MODEL}").uuid
(child,) = grove.fork_many(root, ["[[sim tokens=2000 tps=5]] a long reply"])
while not grove.streaming(child):
    time.sleep(0.05)
print(root, child, flush=True)
sys.stdin.readline()
"""


def shown(store_url: str) -> dict[str, tuple[str, str]]:
    """Each agent's status and turn, as `grove agents --json` and the dashboard show them."""
    with StoreReads(store_url) as reads:
        rows = reads.agents(include_ended=True)["agents"]
    return {row["uuid"]: (row["status"], row["turn"]) for row in rows}


def test_a_grove_holds_its_trees_while_it_lives_and_a_resumed_tree_runs(tmp_path: Path) -> None:
    store_url = f"sqlite:///{tmp_path / 'grove.sqlite3'}"
    with running_grove(tmp_path, store_url=store_url, hosts=1) as grove:
        root = grove.create_root(MODEL).uuid
        child = grove.dispatch(root, "/fork").data["child"]
        assert shown(store_url) == {root: ("running", "idle"), child: ("running", "idle")}
    assert shown(store_url) == {root: ("stopped", "idle"), child: ("stopped", "idle")}
    env = {**cli_environment(tmp_path), "GROVE_STORE": store_url}
    # The commands run in this process: the chat makes a supervisor of its own in the Ray the
    # closed Grove ran in, as a new `grove chat` makes its own.
    listed = invoke(env, "agents")
    assert listed.returncode == 0, listed.stderr
    assert [line.split()[2] for line in listed.stdout.splitlines()] == ["stopped", "stopped"]
    resumed = invoke(
        env, "chat", "--simulate", "--hosts", "1", "--resume", root[:8],
        stdin="[[sim reply='back again']] go on\n",
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    assert "back again" in resumed.stdout
    assert shown(store_url)[root] == ("stopped", "idle")  # that chat has ended too


def test_a_child_of_a_program_that_exited_mid_turn_stops_streaming(tmp_path: Path) -> None:
    env = cli_environment(tmp_path)
    program = subprocess.Popen(
        [sys.executable, "-c", EXITS_MID_TURN], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
    )  # fmt: skip
    try:
        assert program.stdout is not None and program.stdin is not None
        root, child = program.stdout.readline().split()
        assert shown(env["GROVE_STORE"]) == {
            root: ("running", "idle"),
            child: ("running", "streaming"),
        }
        program.stdin.write("\n")
        program.stdin.flush()
        assert program.wait(timeout=120) == 0, program.stderr.read() if program.stderr else ""
    finally:
        if program.poll() is None:
            program.kill()
            program.wait()
    # Nothing let go of its tree: its holder is gone when it is no longer renewed.
    deadline = time.monotonic() + HOLDER_TTL_S + 30
    while shown(env["GROVE_STORE"])[child] != ("stopped", "idle"):
        assert time.monotonic() < deadline, shown(env["GROVE_STORE"])
        time.sleep(0.5)
    assert shown(env["GROVE_STORE"])[root] == ("stopped", "idle")
