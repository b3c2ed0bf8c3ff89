"""No way out of the sandbox through Grove's own git: a workspace holds what a sandboxed command
could have written there (a bare repository in place, a `.git` file pointing at a git directory
of its making, config naming filters, an ssh command, a pager, an external diff, hooks, or a file
the repository's config includes), then Grove's git runs there for real through each way in:
the fork tool, `fork_many`, `grove batch --worktrees`, `grove worktrees --prune` and
`POST /api/worktrees`. The payload would write a marker outside the workspace; it never does.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from grove.actors.tools.grove_git import (
    GIT_SANDBOX_OPTIONS,
    WorktreeError,
    _sandboxed,
    git,
    git_sandbox_problem,
)
from grove.actors.tools.sandbox_check import (
    SANDBOX_OPTIONS,
    lacking_text,
    missing_options,
    sandbox_problem,
)
from grove.actors.tools.worktrees import fork_point, make_worktree, remove_worktree, settle
from grove.cli.app import app
from grove.cli.doctor import Finding, git_sandbox
from grove.supervisor import Grove
from grove.supervisor.errors import CommandError
from grove.supervisor.store import open_store
from tests.conftest import bwrap_version, bwrap_without, path_without
from tests.integration.groves import cli_environment, running_grove, sim_call, tool_results
from tests.integration.services import service_in_process
from tests.security.commands import COMMAND_TIMEOUT_S

MODEL = "claude-haiku-4-5"
TOOLS = ["fork"]
# Git for making the plantings: none of the repository's own settings may run anything yet.
SETUP_GIT = ("-c", "core.hooksPath=/dev/null", "-c", "protocol.allow=never")
ME = ("-c", "user.name=t", "-c", "user.email=t@example.com")
# What `bwrap --help` of bubblewrap 0.1.1 prints (its usage() in bubblewrap.c), word for word.
HELP_OF_0_1_1 = """\
usage: bwrap [OPTIONS...] COMMAND [ARGS...]

    --help                       Print this help
    --version                    Print version
    --args FD                    Parse nul-separated args from FD
    --unshare-user               Create new user namespace (may be automatically implied if not \
setuid)
    --unshare-user-try           Create new user namespace if possible else continue by skipping it
    --unshare-ipc                Create new ipc namespace
    --unshare-pid                Create new pid namespace
    --unshare-net                Create new network namespace
    --unshare-uts                Create new uts namespace
    --unshare-cgroup             Create new cgroup namespace
    --unshare-cgroup-try         Create new cgroup namespace if possible else continue by \
skipping it
    --uid UID                    Custom uid in the sandbox (requires --unshare-user)
    --gid GID                    Custon gid in the sandbox (requires --unshare-user)
    --chdir DIR                  Change directory to DIR
    --setenv VAR VALUE           Set an environment variable
    --unsetenv VAR               Unset an environment variable
    --lock-file DEST             Take a lock on DEST while sandbox is running
    --sync-fd FD                 Keep this fd open while sandbox is running
    --bind SRC DEST              Bind mount the host path SRC on DEST
    --dev-bind SRC DEST          Bind mount the host path SRC on DEST, allowing device access
    --ro-bind SRC DEST           Bind mount the host path SRC readonly on DEST
    --exec-label LABEL           Exec Label for the sandbox
    --file-label LABEL           File label for temporary sandbox content
    --proc DEST                  Mount procfs on DEST
    --dev DEST                   Mount new dev on DEST
    --tmpfs DEST                 Mount new tmpfs on DEST
    --mqueue DEST                Mount new mqueue on DEST
    --dir DEST                   Create dir at DEST
    --file FD DEST               Copy from FD to dest DEST
    --bind-data FD DEST          Copy from FD to file which is bind-mounted on DEST
    --symlink SRC DEST           Create symlink at DEST with target SRC
    --seccomp FD                 Load and use seccomp rules from FD
"""


@dataclass(frozen=True)
class Scene:
    """`workspace`: where the agents work (the Grove's hosts' directory), inside `outer`, which
    is a repository only when a planting makes it one; `marker`: what the payload writes."""

    outer: Path
    workspace: Path
    marker: Path

    @property
    def evil(self) -> Path:
        return self.workspace / "evil.sh"


def setup_git(cwd: Path, *arguments: str) -> str:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("GIT_")},
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
    }
    done = subprocess.run(
        ["git", *SETUP_GIT, *ME, *arguments],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def set_config(config: Path, *pairs: tuple[str, str]) -> None:
    for key, value in pairs:
        subprocess.run(["git", "config", "--file", str(config), key, value], check=True)


# How a repository is found at the workspace: each makes one with a commit and returns the
# config file the payload goes in and the common git directory.
def bare_at_root(scene: Scene) -> tuple[Path, Path]:
    """HEAD, objects/, refs/ and config written into the workspace root: a bare repository
    whose work tree (core.worktree = .) is the workspace itself."""
    w = scene.workspace
    setup_git(w, "init", "-q", "--bare", "-b", "main", ".")
    set_config(w / "config", ("core.bare", "false"), ("core.worktree", "."))
    commit_a_file(w)
    return w / "config", w


def bare_in_a_subfolder(scene: Scene) -> tuple[Path, Path]:
    """The same, with the workspace a subfolder of a real repository."""
    setup_git(scene.outer, "init", "-q", "-b", "main", ".")
    (scene.outer / "top.txt").write_text("the outer repository\n")
    setup_git(scene.outer, "add", "top.txt")
    setup_git(scene.outer, "commit", "-qm", "outer")
    return bare_at_root(scene)


def git_file(scene: Scene) -> tuple[Path, Path]:
    """A `.git` file in the workspace naming a git directory of the sandbox's own making."""
    w = scene.workspace
    setup_git(w, "init", "-q", "-b", "main", "--separate-git-dir", str(w / ".hidden"), ".")
    commit_a_file(w)
    return w / ".hidden" / "config", w / ".hidden"


def included(scene: Scene) -> tuple[Path, Path]:
    """A real repository whose own config (the user's) includes a file of the work tree, as
    projects ask their contributors to: the sandbox writes that file."""
    w = scene.workspace
    setup_git(w, "init", "-q", "-b", "main", ".")
    set_config(w / ".git" / "config", ("include.path", "../.gitconfig"))
    (w / ".gitconfig").write_text("")
    commit_a_file(w)
    return w / ".gitconfig", w / ".git"


def commit_a_file(w: Path) -> None:
    (w / "a.txt").write_text("committed\n")
    os.utime(w / "a.txt", (1e9, 1e9))  # older than the index: git add -A never reads it again
    setup_git(w, "add", "a.txt")
    setup_git(w, "commit", "-qm", "first")


# What the planted config holds: each names the payload where some git command would run it.
def filter_payload(scene: Scene, config: Path, common: Path) -> None:
    evil = str(scene.evil)
    set_config(config, ("filter.x.clean", evil), ("filter.x.smudge", evil))
    set_config(config, ("filter.y.process", evil))
    (scene.workspace / ".gitattributes").write_text("*.txt filter=x\n*.md filter=y\n")


def ssh_payload(scene: Scene, config: Path, common: Path) -> None:
    """A partial clone missing a blob it needs: git fetches it lazily, over ssh."""
    ssh = scene.workspace / "ssh.sh"  # says nothing back: the fetch ends at once
    ssh.write_text(f"#!/bin/sh\necho escaped >> {scene.marker}\nexit 1\n")
    ssh.chmod(0o755)
    set_config(
        config,
        ("core.repositoryformatversion", "1"),
        ("extensions.partialClone", "origin"),
        ("remote.origin.url", "ssh://git@127.0.0.1/x"),
        ("remote.origin.promisor", "true"),
        ("core.sshCommand", str(ssh)),
    )
    blob = setup_git(scene.workspace, "rev-parse", "HEAD:a.txt")
    (common / "objects" / blob[:2] / blob[2:]).unlink()


def pager_payload(scene: Scene, config: Path, common: Path) -> None:
    set_config(config, ("core.pager", str(scene.evil)), ("pager.status", str(scene.evil)))


def diff_payload(scene: Scene, config: Path, common: Path) -> None:
    evil = str(scene.evil)
    set_config(config, ("diff.external", evil), ("diff.x.command", evil))
    set_config(config, ("diff.x.textconv", evil))
    (scene.workspace / ".gitattributes").write_text("* diff=x\n")


def hooks_payload(scene: Scene, config: Path, common: Path) -> None:
    hooks = scene.workspace / "hooks-here"
    for directory in (hooks, common / "hooks"):
        directory.mkdir(exist_ok=True)
        for hook in ("post-checkout", "post-commit", "pre-commit", "reference-transaction"):
            (directory / hook).write_text(scene.evil.read_text())
            (directory / hook).chmod(0o755)
    set_config(config, ("core.hooksPath", str(hooks)))


def include_payload(scene: Scene, config: Path, common: Path) -> None:
    """The planted config only includes another file, which names the filters."""
    payload = scene.workspace / "payload.conf"
    payload.write_text("")
    set_config(config, ("include.path", str(payload)))
    filter_payload(scene, payload, common)


Layout = Callable[[Scene], tuple[Path, Path]]
Payload = Callable[[Scene, Path, Path], None]
PLANTINGS: dict[str, tuple[Layout, Payload]] = {
    "bare repo at the root": (bare_at_root, filter_payload),
    "bare repo in a subfolder of a repository": (bare_in_a_subfolder, filter_payload),
    "a planted .git file pointing elsewhere": (git_file, filter_payload),
    "core.sshCommand": (bare_at_root, ssh_payload),
    "core.pager": (bare_at_root, pager_payload),
    "diff.external": (bare_at_root, diff_payload),
    "filter.* in a file the repository's config includes": (included, filter_payload),
    "core.hooksPath": (bare_at_root, hooks_payload),
    "include.path": (bare_at_root, include_payload),
}


@pytest.fixture(scope="module")
def outer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("outer")


@pytest.fixture(scope="module")
def grove(outer: Path, tmp_path_factory: pytest.TempPathFactory, store_url: str) -> Iterator[Grove]:
    """A Grove whose hosts work in `outer/workspace`."""
    workspace = outer / "workspace"
    workspace.mkdir()
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(workspace)
        with running_grove(tmp_path_factory.mktemp("grove"), store_url=store_url) as made:
            yield made


@pytest.fixture
def scene(outer: Path, tmp_path: Path, grove: Grove) -> Iterator[Scene]:
    """The workspace emptied, and `outer` no repository, for the next planting."""
    workspace = outer / "workspace"
    made = Scene(outer, workspace, tmp_path / "escaped")
    yield made
    deadline = time.monotonic() + 60  # a child that did get forked may still be writing
    while left := [
        *workspace.iterdir(),
        *(outer / n for n in (".git", "top.txt") if (outer / n).exists()),
    ]:
        assert time.monotonic() < deadline, left
        for entry in left:
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)


def plant(scene: Scene, planting: str, agent: str | None = None) -> None:
    """Make the planting in the workspace; with `agent`, also a worktree of Grove's for it
    (as an earlier fork would have made), with work not committed, which `--prune` commits."""
    layout, payload = PLANTINGS[planting]
    scene.evil.write_text(f"#!/bin/sh\necho escaped >> {scene.marker}\ncat\n")
    scene.evil.chmod(0o755)
    config, common = layout(scene)
    if agent is not None:
        path = common / "grove" / "worktrees" / agent[:8]
        setup_git(scene.workspace, "worktree", "add", "-q", "-b", f"grove/{agent[:8]}", str(path))
        (path / "a.txt").write_text("changed!!\n")  # the same size: only its content tells
        (path / "new.txt").write_text("not committed\n")
        (path / "notes.md").write_text("not committed\n")
    payload(scene, config, common)
    if agent is not None and (scene.workspace / ".gitattributes").exists():
        shutil.copy(scene.workspace / ".gitattributes", path / ".gitattributes")
    assert not scene.marker.exists()


def escaped(scene: Scene) -> bool:
    return scene.marker.exists()


def settled(grove: Grove, children: list[str]) -> list[str]:
    """The children, once their turns have ended (and Grove has committed their work)."""
    for child in children:
        grove.wait_turn(child, timeout_s=120)
    return children


@pytest.mark.parametrize("planting", list(PLANTINGS))
def test_the_fork_tool(grove: Grove, scene: Scene, planting: str) -> None:
    plant(scene, planting)
    root = grove.create_root(MODEL, tools=TOOLS, allow=TOOLS).uuid
    assert grove.ask(root, sim_call("fork", prompt="hi", workspace="worktree")).ok
    said = tool_results(grove, root)[-1]["content"]
    if not said.startswith("fork refused: "):
        settled(grove, [json.loads(said)["uuid"]])
    assert not escaped(scene), said
    assert said == f"fork refused: {refusal(scene, planting)}"


@pytest.mark.parametrize("planting", list(PLANTINGS))
def test_fork_many(grove: Grove, scene: Scene, planting: str) -> None:
    plant(scene, planting)
    root = grove.create_root(MODEL, tools=TOOLS, allow=TOOLS).uuid
    try:
        children = grove.fork_many(root, ["hi", "there"], workspace="worktree")
    except CommandError as exc:
        said = str(exc)
    else:
        said = f"forked {settled(grove, children)}"
    assert not escaped(scene), said
    assert said == f"fork refused: {refusal(scene, planting)}"


@pytest.mark.parametrize("planting", list(PLANTINGS))
def test_batch_with_worktrees(grove: Grove, scene: Scene, planting: str, tmp_path: Path) -> None:
    plant(scene, planting)
    tasks, output = tmp_path / "tasks.jsonl", tmp_path / "out.jsonl"
    tasks.write_text('{"id": 1, "prompt": "hi"}\n')
    with service_in_process(grove, tmp_path / "served") as service:
        done = service.grove(
            "batch", str(tasks), "--worktrees", "-m", MODEL, "--output", str(output),
            cwd=scene.workspace,
        )  # fmt: skip
    assert not escaped(scene), done.stderr
    said = done.stdout + done.stderr + (output.read_text() if output.exists() else "")
    assert done.returncode != 0, said
    assert f"fork refused: {refusal(scene, planting)}" in " ".join(said.split()), said


@pytest.mark.parametrize("planting", list(PLANTINGS))
def test_a_batch_of_its_own_with_worktrees(scene: Scene, planting: str, tmp_path: Path) -> None:
    """`grove batch --worktrees --simulate` with no service: it looks at the repository
    before it starts Ray, and refuses at once."""
    plant(scene, planting)
    (tmp_path / "tasks.jsonl").write_text('{"id": 1, "prompt": "hi"}\n')
    done = subprocess.run(
        [sys.executable, "-m", "grove.cli.entry", "batch", str(tmp_path / "tasks.jsonl"),
         "--worktrees", "--simulate", "-m", MODEL, "--output", str(tmp_path / "out.jsonl")],
        cwd=scene.workspace, env=cli_environment(tmp_path), capture_output=True, text=True,
        timeout=COMMAND_TIMEOUT_S, check=False,
    )  # fmt: skip
    assert not escaped(scene), done.stderr
    assert done.returncode == 2, done.stderr
    refused = f"--worktrees cannot work in {scene.workspace}: {refusal(scene, planting)}"
    assert refused in " ".join(done.stderr.split())


def ended_agent(grove: Grove, store_url: str) -> str:
    """An ended agent whose record names the worktree the planting made for it."""
    agent = grove.create_root(MODEL).uuid
    store = open_store(store_url)
    try:
        store.update_agent(agent, status="dead")
    finally:
        store.close()
    return agent


def name_worktree(scene: Scene, agent: str, store_url: str) -> None:
    common = Path(setup_git(scene.workspace, "rev-parse", "--path-format=absolute",
                            "--git-common-dir"))  # fmt: skip
    start = setup_git(scene.workspace, "rev-parse", "HEAD")
    worktree = {
        "path": str(common / "grove" / "worktrees" / agent[:8]),
        "branch": f"grove/{agent[:8]}",
        "start": start,
        "repo": str(scene.workspace),
    }
    store = open_store(store_url)
    try:
        record = store.get_agent(agent)
        assert record is not None
        store.update_agent(agent, metadata={**record.metadata, "worktree": worktree})
    finally:
        store.close()


@pytest.mark.parametrize("planting", list(PLANTINGS))
def test_grove_worktrees(grove: Grove, scene: Scene, planting: str, store_url: str) -> None:
    agent = ended_agent(grove, store_url)
    plant(scene, planting, agent)
    name_worktree(scene, agent, store_url)
    env = {"GROVE_STORE": store_url, "GROVE_CONFIG_FILE": "/nonexistent/config.toml"}
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(scene.workspace)
        done = CliRunner().invoke(app, ["worktrees", "--prune", "--json"], env=env)
    assert not escaped(scene), done.output
    assert done.exit_code == 1, done.output
    assert refusal(scene, planting) in " ".join(done.output.split())


@pytest.mark.parametrize("planting", list(PLANTINGS))
def test_the_worktrees_route(
    grove: Grove, scene: Scene, planting: str, store_url: str, tmp_path: Path
) -> None:
    agent = ended_agent(grove, store_url)
    plant(scene, planting, agent)
    name_worktree(scene, agent, store_url)
    with service_in_process(grove, tmp_path / "served") as service, service.api() as api:
        answer = api.post(
            "/api/worktrees", json={"repository": str(scene.workspace), "prune": True}
        )
    assert not escaped(scene), answer.text
    assert answer.status_code == 400, answer.text
    assert answer.json() == {"error": refusal(scene, planting)}


def bare_scene(tmp_path: Path) -> Scene:
    outer = tmp_path / "outer"
    (outer / "workspace").mkdir(parents=True)
    return Scene(outer, outer / "workspace", tmp_path / "escaped")


@pytest.mark.parametrize("planting", list(PLANTINGS))
async def test_without_bubblewrap_each_planting_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, planting: str
) -> None:
    """Where Grove's git cannot be sandboxed it still reads no planted config: each planting
    is refused before git runs anything there."""
    monkeypatch.setenv("PATH", path_without(tmp_path, "bwrap"))
    scene = bare_scene(tmp_path)
    plant(scene, planting)
    with pytest.raises(WorktreeError) as refused:
        await fork_point(str(scene.workspace), "a" * 32)
    assert not escaped(scene), str(refused.value)
    assert str(refused.value) == refusal(scene, planting)


def refusal(scene: Scene, planting: str) -> str:
    """What Grove says of the planting's repository, whichever way in."""
    w = scene.workspace
    layout, _ = PLANTINGS[planting]
    if layout is git_file:
        return (
            f"the git directory {w / '.hidden'} lies inside the workspace {w}, where sandboxed "
            "commands write (all but its .git, which the sandbox keeps read-only); Grove's "
            "git does not use it: keep the repository's git directory in .git at the top of "
            "the workspace, or outside it"
        )
    if layout is included:
        return (
            f"the config of the repository at {w} includes other files (include.path, "
            "includeIf), which may lie where sandboxed commands write; Grove's git does not "
            "use it: take the include out of its config"
        )
    return (
        f"{w} holds a bare git repository (HEAD, objects/ and refs/ in place), as a sandboxed "
        "command can make one; Grove's git does not use a repository found that way: remove "
        "them, and work in a repository with a .git directory"
    )


async def test_the_repository_s_own_filters_and_hooks_do_not_run(tmp_path: Path) -> None:
    """Sandboxed, Grove's git reads a config of Grove's instead of the repository's: filters,
    diff drivers and hooks the repository names (and the work tree's .gitattributes, which the
    sandbox writes, picks) run neither at the fork nor in the worktree, and the work is kept."""
    scene = bare_scene(tmp_path)
    w = scene.workspace
    payloads_in_its_own_config(scene)
    (w / "b.txt").write_text("not committed\n")
    point = await fork_point(str(w), "a" * 32)
    worktree = await make_worktree(point, "b" * 32)
    (Path(worktree.path) / "c.txt").write_text("the child's\n")
    assert await settle(worktree, "b" * 32) == {
        "branch": "grove/bbbbbbbb",
        "diff_stat": "1 file changed, 1 insertion(+)",
    }
    await remove_worktree(worktree, delete_branch=False)
    assert not escaped(scene)
    shown = setup_git(w, "show", "grove/bbbbbbbb:b.txt")
    assert shown == "not committed"


def payloads_in_its_own_config(scene: Scene) -> None:
    """A repository at the workspace whose own config names every payload, and a
    .gitattributes that picks them."""
    scene.evil.write_text(f"#!/bin/sh\necho escaped >> {scene.marker}\ncat\n")
    scene.evil.chmod(0o755)
    setup_git(scene.workspace, "init", "-q", "-b", "main", ".")
    commit_a_file(scene.workspace)
    common = scene.workspace / ".git"
    for payload in (filter_payload, diff_payload, hooks_payload):
        payload(scene, common / "config", common)
    (scene.workspace / ".gitattributes").write_text("* filter=x diff=x\n")


@pytest.mark.parametrize("bwrap", ["working", "missing", "without --ro-bind-data"])
async def test_what_grove_s_git_runs_stays_in_its_sandbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bwrap: str
) -> None:
    """Were git to run a command after all, it would run in Grove's git sandbox: writing only
    in the repository's git directory, with no secret and no loopback server in sight. Without
    bubblewrap, or with one that lacks an option the sandbox uses, it gets all three (and runs):
    the sandbox is what stops it."""
    if bwrap == "missing":
        monkeypatch.setenv("PATH", path_without(tmp_path, "bwrap"))
    elif bwrap != "working":
        monkeypatch.setenv("PATH", bwrap_without(tmp_path, "--ro-bind-data"))
    sandboxed = bwrap == "working"
    home, outside, repo = tmp_path / "home", tmp_path / "outside", tmp_path / "repo"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY\n")
    monkeypatch.setenv("HOME", str(home))
    repo.mkdir()
    setup_git(repo, "init", "-q", ".")
    server = socket.create_server(("127.0.0.1", 0))
    connect = f"import socket; socket.create_connection(('127.0.0.1', {server.getsockname()[1]}))"
    probe = (
        f"!cat {home}/.ssh/id_ed25519; touch {outside}; touch {repo}/.git/inside; "
        f'{sys.executable} -c "{connect}" && echo CONNECTED'
    )
    try:
        _, said = await git(
            str(repo), "-c", f"alias.probe={probe}", "probe",
            check=False, common_dir=str(repo / ".git"),
        )  # fmt: skip
    finally:
        server.close()
    got_through = ["PRIVATE KEY" in said, "CONNECTED" in said, outside.exists()]
    assert got_through == [not sandboxed] * 3, said
    assert (repo / ".git" / "inside").exists()


def test_bubblewrap_s_help_says_which_options_it_has(tmp_path: Path) -> None:
    """The options Grove's sandboxes use are read off `bwrap --help`: the installed bubblewrap
    has them all; 0.1.1 lacks five of the git sandbox's, `--ro-bind-data` among them. The git
    sandbox uses no option it does not check for."""
    installed = subprocess.run(["bwrap", "--help"], capture_output=True, text=True, check=True)
    assert missing_options(installed.stdout, (*SANDBOX_OPTIONS, *GIT_SANDBOX_OPTIONS)) == []
    missing = missing_options(HELP_OF_0_1_1, GIT_SANDBOX_OPTIONS)
    assert missing == [
        "--new-session", "--die-with-parent", "--cap-drop", "--ro-bind-data", "--remount-ro"
    ]  # fmt: skip
    assert lacking_text("/usr/bin/bwrap", "bubblewrap 0.1.1", missing[3:4]) == (
        "bubblewrap 0.1.1 (/usr/bin/bwrap) has no --ro-bind-data"
    )
    assert lacking_text("/usr/bin/bwrap", "bubblewrap 0.8.0", []) is None
    argv = _sandboxed("bwrap", str(tmp_path), str(tmp_path / ".git"), 3, ["git", "status"])
    used = {word for word in argv[: argv.index("--")] if word.startswith("--")}
    assert used <= set(GIT_SANDBOX_OPTIONS)


async def test_a_bwrap_without_ro_bind_data_leaves_grove_s_git_unsandboxed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bwrap without `--ro-bind-data` (a build or wrapper that has not got it) runs the tools'
    sandbox, and Grove's git runs without its own, as without bubblewrap: the worktree is made,
    not refused with bwrap's "Unknown option"; `grove doctor` says so in one line, and what to
    do."""
    monkeypatch.setenv("PATH", bwrap_without(tmp_path, "--ro-bind-data"))
    shim = shutil.which("bwrap")
    assert sandbox_problem() is None  # the tools' sandbox needs no --ro-bind-data
    lacking = f"{bwrap_version()} ({shim}) has no --ro-bind-data"
    problem = git_sandbox_problem()
    assert problem is not None and problem.what == lacking
    assert git_sandbox() == [
        Finding(
            "warn",
            "git sandbox",
            f"Grove's git runs unsandboxed (its fixed configuration and refusals hold): {lacking}",
            "Install bubblewrap 0.2 or newer, first on PATH (Debian, Ubuntu: sudo apt install "
            "bubblewrap)",
        )
    ]
    repo = tmp_path / "repo"
    repo.mkdir()
    setup_git(repo, "init", "-q", "-b", "main", ".")
    commit_a_file(repo)
    point = await fork_point(str(repo), "a" * 32)
    worktree = await make_worktree(point, "b" * 32)
    assert (Path(worktree.path) / "a.txt").read_text() == "committed\n"
    monkeypatch.undo()
    assert git_sandbox() == [
        Finding("ok", "git sandbox", "Grove's git (worktrees) runs in bubblewrap")
    ]
