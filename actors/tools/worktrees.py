"""Git worktrees of forked agents: made from the parent's workspace (its HEAD plus what it has
not committed), committed to at the end of each turn, listed and removed.

Their git commands are Grove's own (actors/tools/grove_git.py): nothing a sandboxed command
planted in the workspace runs.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from grove.actors.tools.grove_git import WorktreeError, git, repository

BRANCH_PREFIX = "grove/"
WORKTREES_DIR = ("grove", "worktrees")  # under the repository's common git directory
NO_CHANGES = "no changes"


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

    @property
    def common_dir(self) -> str:
        """The common git directory of its repository, which holds it (`WORKTREES_DIR`)."""
        return str(Path(self.path).parents[len(WORKTREES_DIR)])


@dataclass(frozen=True, kw_only=True, slots=True)
class ForkPoint:
    """Where a fork's worktrees come from: the main working tree `repo`, its common git
    directory, the commit they start at, and the workspace's place in the tree (`prefix`)."""

    repo: str
    common_dir: str
    start: str
    prefix: str


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
    found = await repository(workspace)
    if found is None:
        raise WorktreeError(
            f'workspace="worktree" needs a git repository, and {workspace} is not in one: '
            'run Grove inside a repository (git init; git commit), or fork with workspace="shared"'
        )
    top, common_dir = found.top, found.common_dir
    code, heads = await git(
        top, "rev-parse", "HEAD^{commit}", "HEAD^{tree}", check=False, common_dir=common_dir
    )
    if code != 0:
        raise WorktreeError(
            f"the repository {top} has no commit yet; commit once, then fork into worktrees"
        )
    # In the common git directory: the one place Grove's git may write.
    with tempfile.TemporaryDirectory(prefix="grove-index-", dir=common_dir) as scratch:
        index = {"GIT_INDEX_FILE": _copy_of(Path(found.git_dir, "index"), Path(scratch))}
        await git(top, "add", "-A", env=index, common_dir=common_dir)
        _, tree = await git(top, "write-tree", env=index, common_dir=common_dir)
    head, head_tree = heads.splitlines()
    start = head
    if tree != head_tree:
        message = f"grove: what agent {parent[:8]} had not committed when it forked"
        _, start = await git(
            top, "commit-tree", tree, "-p", head, "-m", message,
            env=_identity(parent), common_dir=common_dir,
        )  # fmt: skip
    return ForkPoint(repo=top, common_dir=common_dir, start=start, prefix=found.prefix)


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
    await git(
        point.repo, "worktree", "add", "--quiet", "-b", branch, path, point.start,
        common_dir=point.common_dir,
    )  # fmt: skip
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
    await git(worktree.path, "add", "-A", common_dir=worktree.common_dir)
    code, said = await git(
        worktree.path,
        "commit",
        "--quiet",
        "--no-verify",
        "-m",
        message,
        env=_identity(agent),
        check=False,
        common_dir=worktree.common_dir,
    )
    if code != 0 and "nothing to commit" not in said:
        raise WorktreeError(f"git commit failed in {worktree.path}: {said}")
    return code == 0


async def diff_stat(worktree: Worktree) -> str:
    """`3 files changed, 10 insertions(+), 2 deletions(-)` between the fork and the branch."""
    _, stat = await git(
        worktree.path, "diff", "--shortstat", "--no-ext-diff", "--no-textconv", worktree.start,
        "HEAD", common_dir=worktree.common_dir,
    )  # fmt: skip
    return stat or NO_CHANGES


async def remove_worktree(worktree: Worktree, *, delete_branch: bool) -> None:
    """Remove the worktree's directory (and its branch when `delete_branch`)."""
    common_dir = worktree.common_dir
    await git(
        worktree.repo, "worktree", "remove", "--force", worktree.path,
        check=False, common_dir=common_dir,
    )  # fmt: skip
    if delete_branch:
        await git(
            worktree.repo, "branch", "-D", worktree.branch, check=False, common_dir=common_dir
        )


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
