"""Git worktrees of forked agents: made from the parent's workspace (its HEAD plus what it has
not committed), committed to at the end of each turn, listed and removed.

These are Grove's own git calls, outside any sandbox: hooks, fsmonitor and signing are off.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from providers.errors import GroveError

BRANCH_PREFIX = "grove/"
WORKTREES_DIR = ("grove", "worktrees")  # under the repository's common git directory
GIT_TIMEOUT_S = 120.0
# Git settings that would run something or ask someone, turned off for Grove's own calls.
_SETTINGS = (
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "commit.gpgsign=false",
    "gc.auto=0",
    "maintenance.auto=false",
)
_QUIET = tuple(word for setting in _SETTINGS for word in ("-c", setting))
NO_CHANGES = "no changes"


class WorktreeError(GroveError):
    """A worktree cannot be made or used; the text says why and what to do."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Worktree:
    """An agent's worktree: at `path`, on `branch`, which starts at commit `start` (its
    parent's HEAD, plus a commit of what the parent had not committed) in `repo`."""

    path: str
    branch: str
    start: str
    repo: str

    def to_data(self) -> dict[str, str]:
        return asdict(self)

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> Worktree:
        return cls(
            path=str(data["path"]),
            branch=str(data["branch"]),
            start=str(data["start"]),
            repo=str(data["repo"]),
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class ForkPoint:
    """Where a fork's worktrees come from: the main working tree `repo`, its common git
    directory, the commit they start at, and the workspace's place in the tree (`prefix`)."""

    repo: str
    common_dir: str
    start: str
    prefix: str


async def git(
    cwd: str | Path, *arguments: str, env: Mapping[str, str] | None = None, check: bool = True
) -> tuple[int, str]:
    """Run git in `cwd`: (exit code, stdout). With `check`, a failure is a WorktreeError
    holding git's own words; without, a failure's stdout is followed by its stderr."""
    environment = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C", **(env or {})}
    try:
        process = await asyncio.create_subprocess_exec(
            "git",
            *_QUIET,
            *arguments,
            cwd=cwd,
            env=environment,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    except OSError as exc:  # no git on PATH, or no such directory
        raise WorktreeError(f"cannot run git in {cwd}: {exc.strerror}: {exc.filename}") from exc
    try:
        async with asyncio.timeout(GIT_TIMEOUT_S):
            output, errors = await process.communicate()
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()
        raise
    code = process.returncode
    assert code is not None
    if code != 0:
        said = errors.decode(errors="replace").strip() or f"exit code {code}"
        if check:
            raise WorktreeError(f"git {arguments[0]} failed in {cwd}: {said}")
        output += b"\n" + errors
    return code, output.decode(errors="replace").strip()


async def repository(workspace: str, *more: str) -> list[str] | None:
    """The top of the working tree `workspace` is in and its common git directory (absolute
    paths), then what `more` asks `git rev-parse`; None outside a repository."""
    code, found = await git(
        workspace,
        "rev-parse",
        "--path-format=absolute",
        "--show-toplevel",
        "--git-common-dir",
        *more,
        check=False,
    )
    return found.splitlines() if code == 0 else None


def _identity(agent: str) -> dict[str, str]:
    """Commits Grove makes are signed as the agent that did the work."""
    name, email = f"grove agent {agent[:8]}", "grove@localhost"
    return {
        "GIT_AUTHOR_NAME": name,
        "GIT_AUTHOR_EMAIL": email,
        "GIT_COMMITTER_NAME": name,
        "GIT_COMMITTER_EMAIL": email,
    }


async def fork_point(workspace: str, parent: str) -> ForkPoint:
    """Read the parent's repository once per fork: its HEAD and, when it has changes it has
    not committed (untracked files included, ignored ones not), a commit of them on top,
    made without touching the parent's index or files."""
    if not _is_directory(workspace):
        raise WorktreeError(
            f"the workspace {workspace} is not a directory on {socket.gethostname()}, where "
            "the supervisor runs; worktrees are made there, so the repository must be on a "
            "path that node shares"
        )
    found = await repository(workspace, "--git-path", "index", "--show-prefix")
    if found is None:
        raise WorktreeError(
            f'workspace="worktree" needs a git repository, and {workspace} is not in one: '
            'run Grove inside a repository (git init; git commit), or fork with workspace="shared"'
        )
    top, common_dir, index, prefix = [*found, ""][:4]
    code, head = await git(top, "rev-parse", "--verify", "-q", "HEAD^{commit}", check=False)
    if code != 0:
        raise WorktreeError(
            f"the repository {top} has no commit yet; commit once, then fork into worktrees"
        )
    with tempfile.TemporaryDirectory(prefix="grove-index-") as scratch:
        scratch_index = _copy_of(Path(index), Path(scratch))
        await git(top, "add", "-A", env={"GIT_INDEX_FILE": scratch_index})
        _, tree = await git(top, "write-tree", env={"GIT_INDEX_FILE": scratch_index})
    _, head_tree = await git(top, "rev-parse", "HEAD^{tree}")
    start = head
    if tree != head_tree:
        message = f"grove: what agent {parent[:8]} had not committed when it forked"
        identity = _identity(parent)
        _, start = await git(top, "commit-tree", tree, "-p", head, "-m", message, env=identity)
    return ForkPoint(repo=top, common_dir=common_dir, start=start, prefix=prefix)


def _is_directory(path: str) -> bool:
    return os.path.isdir(path)


def _copy_of(index: Path, scratch: Path) -> str:
    """A copy of the index in `scratch` (its stat cache spares reading unchanged files)."""
    copy = scratch / "index"
    if index.exists():
        shutil.copyfile(index, copy)
    return str(copy)


def worktree_path(point: ForkPoint, agent: str) -> str:
    return os.path.join(point.common_dir, *WORKTREES_DIR, agent[:8])


async def make_worktree(point: ForkPoint, agent: str) -> Worktree:
    """A new worktree for `agent` on branch `grove/<its uuid8>` at the fork point."""
    branch = BRANCH_PREFIX + agent[:8]
    path = worktree_path(point, agent)
    await git(point.repo, "worktree", "add", "--quiet", "-b", branch, path, point.start)
    return Worktree(path=path, branch=branch, start=point.start, repo=point.repo)


async def make_worktrees(
    point: ForkPoint, agents: Sequence[str], at_once: int = 4
) -> list[Worktree]:
    """One worktree per agent, `at_once` made at a time; if one fails, those made are removed
    and the error is raised: a fork makes all its worktrees or none."""
    gate = asyncio.Semaphore(at_once)

    async def one(agent: str) -> Worktree:
        async with gate:
            return await make_worktree(point, agent)

    outcomes = await asyncio.gather(*(one(agent) for agent in agents), return_exceptions=True)
    made = [outcome for outcome in outcomes if isinstance(outcome, Worktree)]
    failed = [outcome for outcome in outcomes if isinstance(outcome, BaseException)]
    if failed:
        for worktree in made:
            await remove_worktree(worktree, delete_branch=True)
        raise failed[0]
    return made


async def settle(worktree: Worktree, agent: str) -> dict[str, str]:
    """At the end of a turn: commit what the agent changed to its branch; the branch and its
    diff stat since the fork (`NO_CHANGES` when none). Three git processes."""
    await commit_all(worktree, agent, f"grove: work of agent {agent[:8]}")
    return {"branch": worktree.branch, "diff_stat": await diff_stat(worktree)}


async def commit_all(worktree: Worktree, agent: str, message: str) -> bool:
    """Commit every change in the worktree (untracked files too) to its branch; whether
    there was anything to commit."""
    await git(worktree.path, "add", "-A")
    code, said = await git(
        worktree.path,
        "commit",
        "--quiet",
        "--no-verify",
        "-m",
        message,
        env=_identity(agent),
        check=False,
    )
    if code != 0 and "nothing to commit" not in said:
        raise WorktreeError(f"git commit failed in {worktree.path}: {said}")
    return code == 0


async def diff_stat(worktree: Worktree) -> str:
    """`3 files changed, 10 insertions(+), 2 deletions(-)` between the fork and the branch."""
    _, stat = await git(worktree.path, "diff", "--shortstat", worktree.start, "HEAD")
    return stat or NO_CHANGES


async def remove_worktree(worktree: Worktree, *, delete_branch: bool) -> None:
    """Remove the worktree's directory (and its branch when `delete_branch`)."""
    await git(worktree.repo, "worktree", "remove", "--force", worktree.path, check=False)
    if delete_branch:
        await git(worktree.repo, "branch", "-D", worktree.branch, check=False)


def missing_text(workspace: str, repo: str | None) -> str:
    """Why an agent's workspace cannot be used on this node."""
    if repo is not None and os.path.isdir(repo):
        return (
            f"the agent's worktree {workspace} is gone (`grove worktrees --prune` removes "
            "those of ended or merged agents); its branch keeps what it committed"
        )
    return (
        f"the agent's workspace {workspace} is not on {socket.gethostname()}, where its host "
        "runs: worktrees need the repository on a path every node of the cluster shares (NFS, "
        'a shared volume), or fork with workspace="shared"'
    )
