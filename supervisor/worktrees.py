"""Worktrees in the tree: children forked with `workspace="worktree"` get a git worktree of
their parent's workspace, made here at fork time and named in their records; and the listing
and pruning behind `grove worktrees`, from the store and git alone.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Literal, get_args

from grove.actors.tools.grove_git import Repository, WorktreeError, git, repository
from grove.actors.tools.worktrees import (
    BRANCH_PREFIX,
    NO_CHANGES,
    WORKTREES_DIR,
    Worktree,
    commit_all,
    diff_stat,
    fork_point,
    make_worktrees,
    remove_worktree,
)
from grove.supervisor.errors import CommandError
from grove.supervisor.holding import shown_status
from grove.supervisor.store.base import Store
from grove.supervisor.store.records import AgentRecord
from grove.supervisor.turns import fork_end
from grove.supervisor.usage import root_of_each

WorkspaceChoice = Literal["shared", "worktree"]
WORKSPACE_CHOICES: tuple[str, ...] = get_args(WorkspaceChoice)
ENDED = ("dead", "reaped")  # statuses whose worktrees `--prune` removes


@dataclass(frozen=True, slots=True)
class Workspaces:
    """Where a deployment's agents work: roots in the hosts' workspace, children where their
    fork says ("shared": their parent's directory; "worktree": a git worktree of their own),
    or by `default` (`[tools] workspace`)."""

    hosts: str = "."
    default: str = "shared"

    def chosen(self, given: object) -> str:
        """A fork's `workspace` argument checked, or the default when not given."""
        if given is None:
            return self.default
        if given not in WORKSPACE_CHOICES:
            raise CommandError(f'workspace must be "shared" or "worktree", not {given!r}')
        return str(given)

    async def place(
        self, store: Store, parent: AgentRecord, children: list[AgentRecord], given: object
    ) -> list[AgentRecord]:
        """The children's records, in worktrees of their own when the fork's `workspace`
        argument (`given`) or the default says so."""
        if self.chosen(given) != "worktree":
            return children
        workspace = str(parent.metadata.get("workspace") or self.hosts)
        return await in_worktrees(store, workspace, parent, children)

    @contextlib.asynccontextmanager
    async def stored(self, children: Sequence[AgentRecord]) -> AsyncIterator[None]:
        """Around storing the children: if that fails, their worktrees go too."""
        try:
            yield
        except BaseException:
            await forget_worktrees(children)
            raise


def worktree_of(metadata: dict[str, Any]) -> Worktree | None:
    """The agent's own worktree, from its record's metadata (None: it has none)."""
    data = metadata.get("worktree")
    return Worktree.from_data(data) if isinstance(data, dict) else None


async def in_worktrees(
    store: Store, workspace: str, parent: AgentRecord, children: Sequence[AgentRecord]
) -> list[AgentRecord]:
    """The children's records, each with a worktree of its own made from the parent's
    `workspace` (its HEAD and what it has not committed), on branch `grove/<uuid8>`, forked
    at the parent's conversation end as it is after these awaits. A WorktreeError is a
    CommandError here: the fork is refused, nothing made."""
    try:
        point = await fork_point(workspace, parent.uuid)
        made = await make_worktrees(point, [child.uuid for child in children])
    except WorktreeError as exc:
        raise CommandError(f"fork refused: {exc}") from exc
    end = fork_end(store, parent)
    placed = []
    for child, worktree in zip(children, made, strict=True):
        workspace = os.path.join(worktree.path, point.prefix).rstrip("/")
        metadata = {**child.metadata, "workspace": workspace, "worktree": worktree.to_data()}
        placed.append(child.model_copy(update={"metadata": metadata, "fork_message_id": end}))
    return placed


async def forget_worktrees(children: Sequence[AgentRecord]) -> None:
    """Undo `in_worktrees` for children that were not stored after all."""
    for child in children:
        worktree = worktree_of(child.metadata)
        if worktree is not None:
            await remove_worktree(worktree, delete_branch=True)


@dataclass(frozen=True, kw_only=True, slots=True)
class WorktreeRow:
    """One of Grove's worktrees of a repository, and what `--prune` did with it."""

    path: str
    branch: str
    agent: str | None  # None: no agent of this store made it
    status: str  # the agent's status, or "unknown"
    merged: bool  # the branch is in the repository's HEAD
    dirty: bool  # it holds changes not committed to the branch
    diff_stat: str
    action: str = "kept"  # or "removed", "removed, branch kept"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


async def worktree_rows(store: Store, workspace: str, prune: bool = False) -> list[WorktreeRow]:
    """Grove's worktrees of the repository `workspace` is in, with their agents. With
    `prune`, those of ended agents (dead, reaped) are removed, and those merged into HEAD
    whose agent is not in a turn; what was not committed is committed to the branch first
    and an unmerged branch is kept, so nothing is lost."""
    try:
        found = await repository(workspace)
    except WorktreeError as exc:
        raise CommandError(str(exc)) from exc
    if found is None:
        raise CommandError(f"{workspace} is not in a git repository; run this inside one")
    top, common = found.top, found.common_dir
    home = str(Path(common, *WORKTREES_DIR))
    if prune:  # forget worktrees whose directory is gone
        await git(top, "worktree", "prune", common_dir=common)
    every = store.list_agents(include_ended=True)
    agents = _agents_by_branch(every)
    roots, held = root_of_each(every), store.tree_holders()
    rows = []
    for path, branch in await _listed(top, common):
        if not branch.startswith(BRANCH_PREFIX) or str(Path(path).parent) != home:
            continue
        record = agents.get(branch)
        row = await _row(store, found, path, branch, record, prune)
        if record is not None:
            row = replace(row, status=shown_status(record.status, roots[record.uuid] in held))
        rows.append(row)
    return rows


def _agents_by_branch(agents: Sequence[AgentRecord]) -> dict[str, AgentRecord]:
    return {
        str(record.metadata["worktree"]["branch"]): record
        for record in agents
        if isinstance(record.metadata.get("worktree"), dict)
    }


async def _listed(top: str, common: str) -> list[tuple[str, str]]:
    """(path, branch name) of each worktree git knows in the repository at `top`."""
    _, text = await git(top, "worktree", "list", "--porcelain", common_dir=common)
    listed = []
    for block in text.split("\n\n"):
        fields = dict(line.partition(" ")[::2] for line in block.splitlines())
        if "worktree" in fields and fields.get("branch", "").startswith("refs/heads/"):
            listed.append((fields["worktree"], fields["branch"].removeprefix("refs/heads/")))
    return listed


async def _row(
    store: Store, found: Repository, path: str, branch: str, record: AgentRecord | None, prune: bool
) -> WorktreeRow:
    merged = await _merged(found, branch)
    worktree = worktree_of(record.metadata) if record is not None else None
    dirty = False
    if not _is_directory(path):
        stat, worktree = "its directory is gone (--prune forgets it)", None
    elif worktree is None:
        stat = "?"  # no agent of this store made it: nothing says where it started
    else:
        _, changes = await git(
            path, "status", "--porcelain", "--ignore-submodules=all", common_dir=found.common_dir
        )
        dirty = bool(changes)
        stat = await diff_stat(worktree)
        if dirty:
            stat = (
                "changes not committed" if stat == NO_CHANGES else f"{stat}, and more not committed"
            )
    row = WorktreeRow(
        path=path,
        branch=branch,
        agent=record.uuid if record else None,
        status=record.status if record else "unknown",
        merged=merged,
        dirty=dirty,
        diff_stat=stat,
    )
    if not prune or worktree is None or record is None:
        return row
    ended = record.status in ENDED
    if not ended and not (merged and not dirty and not _in_turn(store, record.uuid)):
        return row
    if dirty:
        await commit_all(worktree, record.uuid, "grove: left in the worktree when it was pruned")
        merged = await _merged(found, branch)
    await remove_worktree(worktree, delete_branch=merged)
    action = "removed" if merged else "removed, branch kept"
    return WorktreeRow(**{**row.as_dict(), "merged": merged, "action": action})


async def _merged(found: Repository, branch: str) -> bool:
    """Whether `branch` is in the HEAD of the repository."""
    code, _ = await git(
        found.top, "merge-base", "--is-ancestor", branch, "HEAD",
        check=False, common_dir=found.common_dir,
    )  # fmt: skip
    return code == 0


def _is_directory(path: str) -> bool:
    return os.path.isdir(path)


def _in_turn(store: Store, uuid: str) -> bool:
    """Whether the agent's last stored message is one it has not answered yet."""
    messages = store.agent_messages(uuid)
    return bool(messages) and messages[-1].kind == "user"
