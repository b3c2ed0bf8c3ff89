"""Worktrees of forked children, for real (Ray, git, bubblewrap): each child of a fork with
`workspace="worktree"` works on branch `grove/<uuid8>` made from its parent's HEAD with what the
parent had not committed, its tools and sandbox rooted there; its answer names the branch and
the diff stat; `[tools] workspace` sets the default; outside a repository a fork is refused;
worktrees added at once by several processes are all made.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path

import pytest
from typer.testing import CliRunner

from grove.actors.tools.grove_git import LOCK_FILE, WorktreeError, worktrees_locked
from grove.actors.tools.grove_git import git as grove_git
from grove.actors.tools.worktrees import (
    ForkPoint,
    Worktree,
    fork_point,
    make_worktree,
    remove_worktree,
)
from grove.actors.turn_result import TurnResult
from grove.cli.app import app
from grove.supervisor import Grove
from grove.supervisor.errors import CommandError
from grove.supervisor.holding import HOLDER_RENEW_S
from grove.supervisor.store import open_store
from tests.integration.groves import running_grove, sim_call, tool_results
from tests.integration.services import service_in_process

MODEL = "claude-haiku-4-5"
TOOLS = ["bash", "read", "fork", "wait"]
# A process of its own adding worktrees at the fork point its first argument gives, for the
# agents each line of its stdin names, all at once; it says what came of each, line by line.
ADDER = """
import asyncio, json, sys
from grove.actors.tools.worktrees import ForkPoint, make_worktree

async def main(point):
    print("ready", flush=True)
    for line in sys.stdin:
        made = await asyncio.gather(
            *(make_worktree(point, agent) for agent in line.split()), return_exceptions=True
        )
        print(json.dumps([str(m) if isinstance(m, BaseException) else "made" for m in made]),
              flush=True)

asyncio.run(main(ForkPoint(**json.loads(sys.argv[1]))))
"""


def git(repo: Path, *arguments: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *arguments], capture_output=True, text=True, check=True
    )
    return done.stdout.rstrip()


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = tmp_path_factory.mktemp("repo")
    git(repo, "init", "-q", "-b", "main")
    (repo / "tracked.txt").write_text("as committed\n")
    (repo / ".gitignore").write_text("*.log\n")
    git(repo, "add", ".")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "first")
    return repo


@pytest.fixture(scope="module")
def grove(repo: Path, tmp_path_factory: pytest.TempPathFactory, store_url: str) -> Iterator[Grove]:
    """A Grove whose workspace is `repo` and whose forks make worktrees unless told not to."""
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(repo)
        env = {"GROVE_TOOLS__WORKSPACE": "worktree"}
        with running_grove(tmp_path_factory.mktemp("grove"), store_url=store_url, env=env) as made:
            yield made


@pytest.fixture(scope="module")
def root(grove: Grove) -> str:
    return grove.create_root(MODEL, tools=TOOLS, allow=TOOLS).uuid


def results(grove: Grove, children: list[str]) -> dict[str, TurnResult]:
    finished: dict[str, TurnResult] = {}
    for child in children:
        result = grove.wait_turn(child, timeout_s=120)
        assert result is not None and result.ok, result
        finished[child] = result
    return finished


def test_children_work_on_branches_of_their_own(grove: Grove, repo: Path, root: str) -> None:
    (repo / "tracked.txt").write_text("changed, not committed\n")
    (repo / "new.txt").write_text("untracked\n")
    (repo / "noise.log").write_text("ignored\n")
    escape = f"echo escaped > {repo}/escaped.txt"
    prompts = [
        sim_call("bash", command=f"cat tracked.txt new.txt; echo one > mine.txt; {escape}"),
        sim_call("bash", command="ls noise.log; echo two > mine.txt; echo more >> tracked.txt"),
    ]
    first, second = children = grove.fork_many(root, prompts)  # the configured default
    done = results(grove, children)
    stats = {"1 file changed, 1 insertion(+)", "2 files changed, 2 insertions(+)"}
    for child, result in done.items():
        assert result.worktree is not None
        assert result.worktree["branch"] == f"grove/{child[:8]}"
        assert result.worktree["diff_stat"] in stats
    assert git(repo, "show", f"grove/{first[:8]}:mine.txt") == "one"
    assert git(repo, "show", f"grove/{second[:8]}:mine.txt") == "two"
    seen = tool_results(grove, first)[-1]["content"]
    assert "changed, not committed\nuntracked" in seen  # what the parent had not committed
    assert not (repo / "escaped.txt").exists()  # the sandbox is rooted in the worktree
    assert "No such file" in tool_results(grove, second)[-1]["content"]  # ignored: not carried
    # The parent's own files are as they were: nothing committed there, nothing written.
    assert git(repo, "status", "--porcelain").splitlines() == [
        " M tracked.txt",
        "?? new.txt",
    ]
    assert not (repo / "mine.txt").exists() and git(repo, "branch", "--show-current") == "main"


def test_shared_children_work_in_the_parent_directory(grove: Grove, repo: Path, root: str) -> None:
    (child,) = grove.fork_many(
        root, [sim_call("bash", command="echo shared > shared.txt")], workspace="shared"
    )
    assert results(grove, [child])[child].worktree is None
    assert (repo / "shared.txt").read_text() == "shared\n"
    (repo / "shared.txt").unlink()


def test_the_fork_tool_and_the_api_fork_into_worktrees(grove: Grove, repo: Path) -> None:
    parent = grove.create_root(MODEL, tools=TOOLS, allow=TOOLS).uuid
    call = sim_call("fork", prompt="say hi", workspace="worktree")
    assert grove.ask(parent, call).ok
    made = json.loads(tool_results(grove, parent)[-1]["content"])
    assert made["branch"] == f"grove/{made['uuid'][:8]}"
    answer = results(grove, [made["uuid"]])[made["uuid"]]
    assert answer.worktree is not None and answer.worktree["diff_stat"] == "no changes"
    assert grove.ask(parent, sim_call("wait", uuids=[made["uuid"]], timeout=60)).ok
    waited = json.loads(tool_results(grove, parent)[-1]["content"])[made["uuid"]]
    assert waited["status"] == "done" and waited["branch"] == made["branch"]
    assert waited["diff_stat"] == "no changes"
    child = grove.fork(parent, sim_call("bash", command="echo api > api.txt"), workspace="worktree")
    result = results(grove, [child])[child]
    assert result.worktree is not None and result.worktree["branch"] == f"grove/{child[:8]}"
    assert result.worktree["diff_stat"] == "1 file changed, 1 insertion(+)"
    refused = sim_call("fork", prompt="x", workspace="elsewhere")
    assert grove.ask(parent, refused).ok
    assert tool_results(grove, parent)[-1]["content"] == (
        'workspace must be "shared" or "worktree", not \'elsewhere\''
    )


def test_stored_answers_name_the_branch(grove: Grove, root: str, store_url: str) -> None:
    keys = ["stored-a"]
    (child,) = grove.fork_many(root, [sim_call("bash", command="touch s.txt")], keys=keys)
    results(grove, [child])
    (found, answer) = grove.answered(keys)["stored-a"]
    assert found == child and answer.worktree is not None
    assert answer.worktree["diff_stat"] == "1 file changed, 0 insertions(+), 0 deletions(-)"
    store = open_store(store_url)
    try:
        record = store.get_agent(child)
    finally:
        store.close()
    assert record is not None and record.metadata["worktree"]["branch"] == f"grove/{child[:8]}"


def test_a_worktree_that_is_gone_or_not_on_the_node_is_named(
    grove: Grove, repo: Path, root: str
) -> None:
    (child,) = grove.fork_many(root, ["[[sim reply=ready]] wait"])
    results(grove, [child])
    git(repo, "worktree", "remove", "--force", grove.agent(child).metadata["worktree"]["path"])
    gone = grove.ask(child, "go on")
    assert gone.error is not None and "is gone (`grove worktrees --prune`" in gone.error
    moved = repo.with_name(repo.name + "-elsewhere")
    repo.rename(moved)  # as a node that does not share the repository's path sees it
    try:
        missing = grove.ask(child, "go on")
    finally:
        moved.rename(repo)
    assert missing.error is not None
    assert "where its host runs: worktrees need the repository on a path every node" in (
        missing.error
    )


def test_outside_a_repository_a_worktree_fork_is_refused(
    grove: Grove, repo: Path, root: str
) -> None:
    before = len(grove.history(root))
    (repo / ".git").rename(repo / "git-away")
    try:
        with pytest.raises(CommandError) as refused:
            grove.fork_many(root, ["never"], workspace="worktree")
    finally:
        (repo / "git-away").rename(repo / ".git")
    assert str(refused.value) == (
        f'fork refused: workspace="worktree" needs a git repository, and {repo} is not in '
        "one: run Grove inside a repository (git init; git commit), or fork with "
        'workspace="shared"'
    )
    assert len(grove.history(root)) == before


def worktrees_cli(store_url: str, *arguments: str) -> tuple[int, str]:
    env = {"GROVE_STORE": store_url, "GROVE_CONFIG_FILE": "/nonexistent/config.toml"}
    done = CliRunner().invoke(app, ["worktrees", *arguments], env=env)
    return done.exit_code, done.output


def test_grove_worktrees_lists_and_prunes(
    grove: Grove, repo: Path, store_url: str, tmp_path: Path
) -> None:
    parent = grove.create_root(MODEL, tools=TOOLS, allow=TOOLS).uuid
    prompts = [sim_call("bash", command=f"echo {n} > w{n}.txt") for n in range(4)]
    killed, merged, kept, vanished = children = grove.fork_many(
        parent, prompts, workspace="worktree"
    )
    results(grove, children)
    code, listed = worktrees_cli(store_url, "--json")
    rows = {row["agent"]: row for row in map(json.loads, listed.splitlines())}
    assert code == 0 and set(children) <= set(rows)
    assert rows[kept]["branch"] == f"grove/{kept[:8]}" and rows[kept]["status"] == "running"
    assert rows[kept]["diff_stat"] == "1 file changed, 1 insertion(+)"
    assert not rows[kept]["merged"] and not rows[kept]["dirty"]
    # One agent ends with work it never committed; one's branch is merged into HEAD.
    leftover = Path(grove.agent(killed).metadata["worktree"]["path"]) / "left.txt"
    leftover.write_text("left over\n")
    assert grove.dispatch(parent, f"/kill {killed} --yes").ok
    me = ("-c", "user.name=t", "-c", "user.email=t@example.com")
    git(repo, "add", "-A")  # the parent commits what its children got uncommitted...
    git(repo, *me, "commit", "--allow-empty", "-qm", "the parent's own changes")
    git(repo, *me, "merge", "-q", f"grove/{merged[:8]}")  # ...and merges cleanly
    shutil.rmtree(grove.agent(vanished).metadata["worktree"]["path"])  # by hand
    code, text = worktrees_cli(store_url)
    assert f"grove/{vanished[:8]}  agent {vanished[:8]} running  not merged  its directory" in text
    assert code == 0 and f"grove/{killed[:8]}  agent {killed[:8]} dead  not merged  " in text
    assert f"grove/{merged[:8]}  agent {merged[:8]} running  merged  1 file changed" in text
    code, pruned = worktrees_cli(store_url, "--prune", "--json")
    actions = {row["agent"]: row["action"] for row in map(json.loads, pruned.splitlines())}
    assert code == 0
    assert actions[killed] == "removed, branch kept" and actions[merged] == "removed"
    assert actions[kept] == "kept"
    assert git(repo, "show", f"grove/{killed[:8]}:left.txt") == "left over"  # nothing lost
    assert f"grove/{merged[:8]}" not in git(repo, "branch", "--list", "grove/*")
    assert not leftover.parent.exists()
    listed_after = [
        json.loads(line)["agent"] for line in worktrees_cli(store_url, "--json")[1].splitlines()
    ]
    assert kept in listed_after and not {killed, merged, vanished} & set(listed_after)
    assert [row.agent for row in grove.worktrees()] == listed_after  # the Python API's view

    # Taken for gone (as if its Grove had been killed), the agent shows stopped; the Grove's
    # next renewal finds itself gone and holds its trees again. A renewal may come between the
    # drop and the read (every HOLDER_RENEW_S): then its holder is back, and the drop is tried
    # again; the agent must show stopped while no holder is there.
    store = open_store(store_url)
    try:
        for _ in range(5):
            store.drop_holder(store.tree_holders()[parent])
            if status_of(kept, store_url) == "stopped":
                break
            assert parent in store.tree_holders(), "shown running with no Grove holding it"
        else:
            raise AssertionError("a renewal came between every drop and read")
    finally:
        store.close()
    deadline = time.monotonic() + HOLDER_RENEW_S * 5
    while status_of(kept, store_url) != "running":
        assert time.monotonic() < deadline
        time.sleep(0.2)


def status_of(agent: str, store_url: str) -> str:
    """The agent's status as `grove worktrees --json` shows it."""
    rows = map(json.loads, worktrees_cli(store_url, "--json")[1].splitlines())
    return next(str(row["status"]) for row in rows if row["agent"] == agent)


def test_grove_worktrees_outside_a_repository(store_url: str, tmp_path: Path) -> None:
    (tmp_path / "tasks.jsonl").write_text('{"id": 1, "prompt": "hi"}\n')
    env = {"GROVE_STORE": store_url, "GROVE_CONFIG_FILE": "/nonexistent/config.toml"}
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(tmp_path)
        code, text = worktrees_cli(store_url)
        batch = ["batch", "tasks.jsonl", "--worktrees", "--simulate", "-m", MODEL]
        refused = CliRunner().invoke(app, batch, env=env)
    assert code == 1 and f"{tmp_path} is not in a git repository; run this inside one" in text
    assert refused.exit_code == 2  # at once: no Ray started, no output written
    assert f"--worktrees needs a git repository, and {tmp_path} is not in one" in refused.output
    assert not (tmp_path / "tasks.out.jsonl").exists()


async def test_worktrees_added_at_once_by_several_processes(tmp_path: Path) -> None:
    """Worktrees of one repository added at once by tasks of several processes (hosts are
    processes of their own) while others are removed: all are made, and the removed ones'
    branches go. Git's worktree commands run one at a time per repository; before, one reading
    worktrees/ while another wrote it died ("failed to read .git/worktrees/<id>/commondir")."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "a.txt").write_text("committed\n")
    git(repo, "add", ".")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "first")
    point = await fork_point(str(repo), "a" * 32)
    adders = await asyncio.gather(*(started_adder(point) for _ in range(2)))
    removed: list[Worktree] = []
    ours: list[Worktree] = []
    try:
        for _ in range(6):  # rounds: 5 worktrees of each adder's, 6 of ours, 2 of ours removed
            for adder in adders:
                assert adder.stdin is not None
                adder.stdin.write(" ".join(uuid.uuid4().hex for _ in range(5)).encode() + b"\n")
            going, ours = ours[:2], ours[2:]
            said, _, _ = await asyncio.gather(
                asyncio.gather(*(said_by(adder) for adder in adders)),
                add(point, 6, ours),
                asyncio.gather(*(remove_worktree(w, delete_branch=True) for w in going)),
            )
            assert said == [["made"] * 5] * len(adders)
            removed += going
    finally:
        for adder in adders:
            assert adder.stdin is not None
            adder.stdin.close()
            await adder.wait()
    branches = git(repo, "branch", "--list", "grove/*")
    assert not [w.branch for w in removed if w.branch in branches]
    assert len(git(repo, "worktree", "list").splitlines()) == 1 + 6 * (5 * 2 + 6) - len(removed)


async def test_git_s_worktree_commands_wait_for_the_repository_s_lock(tmp_path: Path) -> None:
    """While another process holds the worktrees lock, Grove's `git worktree` waits for it, and
    a wait past its bound is an error naming the lock; once it is let go, the command runs."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    common = str(repo / ".git")
    lock = Path(common, *LOCK_FILE)
    lock.parent.mkdir()
    held = os.open(lock, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(held, fcntl.LOCK_EX)  # as another process would: an open file of its own
        with pytest.raises(WorktreeError) as waited:
            async with worktrees_locked(common, timeout_s=0.3):
                pass
        listing = asyncio.create_task(grove_git(str(repo), "worktree", "list", common_dir=common))
        await asyncio.sleep(0.3)
        assert not listing.done()
    finally:
        os.close(held)
    assert str(waited.value) == (
        f"Grove's git waited 0.3 s for the worktrees lock {lock}, which another of its git "
        "commands on that repository held all along (worktrees are added, removed and listed "
        "one at a time per repository); it is let go when that command or its process ends: "
        "try again"
    )
    code, listed = await listing
    assert code == 0 and listed.startswith(str(repo))


async def started_adder(point: ForkPoint) -> asyncio.subprocess.Process:
    """An ADDER process, once it is ready to add."""
    adder = await asyncio.create_subprocess_exec(
        sys.executable, "-c", ADDER, json.dumps(asdict(point)),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert adder.stdout is not None and await adder.stdout.readline() == b"ready\n"
    return adder


async def said_by(adder: asyncio.subprocess.Process) -> list[str]:
    assert adder.stdout is not None
    return list(json.loads(await adder.stdout.readline()))


async def add(point: ForkPoint, count: int, made: list[Worktree]) -> None:
    """`count` worktrees added at once, into `made`."""
    made += await asyncio.gather(*(make_worktree(point, uuid.uuid4().hex) for _ in range(count)))


def test_batch_and_worktrees_through_a_service(
    grove: Grove, repo: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The service (on the module's Grove) works in the repository it was started in; `grove
    worktrees` prints the same through it as from its store."""
    base = tmp_path_factory.mktemp("served")
    tasks, output = base / "tasks.jsonl", base / "out.jsonl"
    calls = [sim_call("bash", command=f"echo {n} > served{n}.txt") for n in range(2)]
    tasks.write_text(
        "".join(json.dumps({"id": n, "prompt": p}) + "\n" for n, p in enumerate(calls))
    )
    with service_in_process(grove, base) as service:
        done = service.grove(
            "batch", str(tasks), "--worktrees", "--tools", "bash", "--allow", "bash",
            "-m", MODEL, "--output", str(output), cwd=repo,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        records = [json.loads(line) for line in output.read_text().splitlines()]
        assert {record["diff_stat"] for record in records} == {"1 file changed, 1 insertion(+)"}
        with service.api() as api:  # the HTTP API forks into worktrees as well
            forked = api.post(
                f"/api/agents/{records[0]['agent']}/fork",
                json={
                    "prompts": [sim_call("bash", command="touch h.txt")],
                    "workspace": "worktree",
                },
            )
            (child,) = forked.json()["children"]
            answer = api.get(f"/api/agents/{child}/wait", params={"timeout": 120}).json()
        assert answer["result"]["worktree"]["branch"] == f"grove/{child[:8]}"
        served = CliRunner().invoke(app, ["worktrees", "--json"], env=service.env)
        store = service.env["GROVE_STORE"]
        local = CliRunner().invoke(app, ["--store", store, "worktrees", "--json"], env=service.env)
    assert served.exit_code == local.exit_code == 0 and served.output == local.output
    rows = {row["agent"]: row for row in map(json.loads, served.output.splitlines())}
    for record in records:
        assert rows[record["agent"]]["branch"] == record["branch"] == f"grove/{record['agent'][:8]}"
