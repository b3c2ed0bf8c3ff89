"""Grove's own git (the worktrees of forked agents): a fixed configuration of Grove's, no system,
global or repository configuration, and, where bubblewrap works, a sandbox of its own.

It runs outside the tools' sandbox, in workspaces sandboxed commands write: nothing they could
have planted there (a bare repository, a `.git` file, config naming filters, an ssh command, a
pager, hooks, or a file the config includes) may make it run anything. Its commands on the
repository's worktrees run one at a time per repository, across tasks and processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import re
import shutil
import weakref
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass

from grove.actors.tools.sandbox import SandboxPolicy, secret_paths
from grove.actors.tools.sandbox_check import UPGRADE_BWRAP, SandboxProblem, lacked, sandbox_problem
from grove.providers.errors import GroveError

GIT_TIMEOUT_S = 120.0
LOCK_TIMEOUT_S = 60.0  # the longest a git command waits for the repository's worktrees lock
LOCK_FILE = ("grove", "worktrees.lock")  # under the common git directory
# Commands that read every worktree's entry under the common git directory's worktrees/, which
# `git worktree add` writes in steps: one reading an entry half-written dies ("failed to read
# .git/worktrees/<id>/commondir: Success"). Grove runs them one at a time per repository.
_ALL_WORKTREES = frozenset(("worktree", "branch"))
_LOCK_POLL_S = (0.001, 0.01)  # the first and the longest pause between tries of the file lock
# Settings that would run something, reach the network or ask someone, off for Grove's git; git
# hands them on to every git process it starts.
_SETTINGS = (
    "safe.bareRepository=explicit",  # never a bare repository found in place
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.attributesFile=/dev/null",
    "core.sshCommand=false",
    "core.pager=cat",
    "protocol.allow=never",  # no fetch, not even a partial clone's lazy one
    "credential.helper=",
    "submodule.recurse=false",
    "diff.ignoreSubmodules=all",  # no git process in a nested repository
    "status.submoduleSummary=false",
    "commit.gpgsign=false",
    "gc.auto=0",
    "maintenance.auto=false",
)
_QUIET = tuple(word for setting in _SETTINGS for word in ("-c", setting))
# What a git process of Grove's gets of the host's environment: no GIT_* variable of its own.
_PASSED = ("PATH", "TMPDIR")
_FIXED = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_ATTR_NOSYSTEM": "1",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_PAGER": "cat",
    "GIT_NO_REPLACE_OBJECTS": "1",
    "LC_ALL": "C",
}
# The repository's config as Grove's sandboxed git sees it: the format, and nothing to run.
_CONFIG = (
    "[core]\n\trepositoryformatversion = 1\n\tbare = false\n[extensions]\n\tobjectformat = {}\n"
)
# A section [include] or [includeIf "..."] (the old [include.x] too), in any case.
_INCLUDES = re.compile(rb"^\s*\[\s*include(if)?\b", re.IGNORECASE | re.MULTILINE)


class WorktreeError(GroveError):
    """A worktree cannot be made or used; the text says why and what to do."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Repository:
    """The repository a workspace is in: the top of its working tree, its git directory and
    common git directory (absolute), and the workspace's place in the tree (`prefix`)."""

    top: str
    git_dir: str
    common_dir: str
    prefix: str


async def git(
    cwd: str,
    *arguments: str,
    env: Mapping[str, str] | None = None,
    check: bool = True,
    common_dir: str | None = None,
) -> tuple[int, str]:
    """Run git in `cwd`: (exit code, stdout). With `check`, a failure is a WorktreeError
    holding git's own words; without, a failure's stdout is followed by its stderr. Sandboxed,
    git writes only in `common_dir` (the repository's, once known; nowhere without it) and
    reads Grove's config there instead of the repository's. A command on the worktrees (named
    first in `arguments`) holds the repository's worktrees lock while it runs."""
    if common_dir is None or arguments[0] not in _ALL_WORKTREES:
        return await _run(cwd, arguments, env, check, common_dir)
    async with worktrees_locked(common_dir):
        return await _run(cwd, arguments, env, check, common_dir)


async def _run(
    cwd: str,
    arguments: Sequence[str],
    env: Mapping[str, str] | None,
    check: bool,
    common_dir: str | None,
) -> tuple[int, str]:
    environment = _environment(cwd, env, common_dir)
    argv = ["git", *_QUIET, *arguments]
    config = None
    bwrap = await _working_bwrap()
    if bwrap is not None:
        if common_dir is not None:
            config = _config_pipe(common_dir, await _object_format(common_dir))
        argv = _sandboxed(bwrap, cwd, common_dir, config, argv)
    passed = () if config is None else (config,)
    try:
        process = await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            env=environment,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            pass_fds=passed,
        )
    except OSError as exc:  # no git on PATH, or no such directory
        raise WorktreeError(f"cannot run git in {cwd}: {exc.strerror}: {exc.filename}") from exc
    finally:
        for end in passed:
            os.close(end)
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


# event loop -> common git directory -> the lock its tasks take before the file lock (which
# alone holds, however a directory is spelled: this spares polling it)
_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Lock]] = (
    weakref.WeakKeyDictionary()
)


@contextlib.asynccontextmanager
async def worktrees_locked(
    common_dir: str, timeout_s: float = LOCK_TIMEOUT_S
) -> AsyncIterator[None]:
    """Hold the worktrees lock of the repository whose common git directory is `common_dir`:
    among this event loop's tasks an asyncio lock, then among threads and processes an flock
    on `LOCK_FILE` there (let go when its holder ends, however it ends), tried without
    blocking the event loop. Waiting longer than `timeout_s` is a WorktreeError."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    lock = _locks.setdefault(loop, {}).setdefault(common_dir, asyncio.Lock())
    path = os.path.join(common_dir, *LOCK_FILE)
    try:
        async with asyncio.timeout_at(deadline):
            await lock.acquire()
    except TimeoutError:
        raise _lock_timeout(path, timeout_s) from None
    try:
        held = await _file_locked(path, deadline)
        if held is None:
            raise _lock_timeout(path, timeout_s)
        try:
            yield
        finally:
            os.close(held)  # lets the flock go
    finally:
        lock.release()


async def _file_locked(path: str, deadline: float) -> int | None:
    """A descriptor of `path` holding an exclusive flock on it (None: not had by `deadline`)."""
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
        descriptor = os.open(path, flags, 0o600)
    except OSError as exc:
        raise WorktreeError(f"cannot open the worktrees lock {path}: {exc.strerror}") from exc
    loop = asyncio.get_running_loop()
    pause, longest = _LOCK_POLL_S
    try:
        while True:
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return descriptor
            except BlockingIOError:
                left = deadline - loop.time()
                if left <= 0:
                    os.close(descriptor)
                    return None
                await asyncio.sleep(min(pause, left))
                pause = min(2 * pause, longest)
    except BaseException:
        os.close(descriptor)
        raise


def _lock_timeout(path: str, timeout_s: float) -> WorktreeError:
    return WorktreeError(
        f"Grove's git waited {timeout_s:g} s for the worktrees lock {path}, which another of "
        "its git commands on that repository held all along (worktrees are added, removed and "
        "listed one at a time per repository); it is let go when that command or its process "
        "ends: try again"
    )


def _environment(cwd: str, env: Mapping[str, str] | None, common_dir: str | None) -> dict[str, str]:
    """Git's environment: `_PASSED` of the host's, `_FIXED`, then `env`. Once the repository
    is known (`common_dir`), git looks for it in `cwd` alone, never above."""
    environment = {name: os.environ[name] for name in _PASSED if name in os.environ}
    environment.update(_FIXED, **(env or {}))
    if common_dir is not None:
        environment["GIT_CEILING_DIRECTORIES"] = os.path.dirname(os.path.realpath(cwd))
    return environment


async def repository(workspace: str) -> Repository | None:
    """The repository `workspace` is in (None outside one), if Grove's git may use it: it is
    found by its `.git`, its git directory does not lie where the workspace's sandboxed
    commands write, and its config includes no other file."""
    code, found = await git(
        workspace,
        "rev-parse",
        "--path-format=absolute",
        "--show-toplevel",
        "--absolute-git-dir",
        "--git-common-dir",
        "--show-object-format",
        "--show-prefix",
        check=False,
    )
    if code != 0:
        if "safe.bareRepository" in found:
            raise WorktreeError(
                f"{workspace} holds a bare git repository (HEAD, objects/ and refs/ in place), "
                "as a sandboxed command can make one; Grove's git does not use a repository "
                "found that way: remove them, and work in a repository with a .git directory"
            )
        return None
    top, git_dir, common_dir, object_format, prefix = [*found.splitlines(), ""][:5]
    for directory in dict.fromkeys((git_dir, common_dir)):
        if _writable_in(workspace, directory):
            raise WorktreeError(
                f"the git directory {directory} lies inside the workspace {workspace}, where "
                "sandboxed commands write (all but its .git, which the sandbox keeps "
                "read-only); Grove's git does not use it: keep the repository's git directory "
                "in .git at the top of the workspace, or outside it"
            )
    if any(map(_includes, (common_dir, git_dir))):
        raise WorktreeError(
            f"the config of the repository at {top} includes other files (include.path, "
            "includeIf), which may lie where sandboxed commands write; Grove's git does not "
            "use it: take the include out of its config"
        )
    _formats[common_dir] = object_format
    return Repository(top=top, git_dir=git_dir, common_dir=common_dir, prefix=prefix)


def _includes(git_dir: str) -> bool:
    """Whether a config file of the git directory has an include section (a superset of
    those that include a file: more is refused, never less)."""
    for name in ("config", "config.worktree"):
        try:
            with open(os.path.join(git_dir, name), "rb") as config:
                if _INCLUDES.search(config.read()):
                    return True
        except OSError:  # none (git says what else is wrong with it)
            continue
    return False


def _writable_in(workspace: str, directory: str) -> bool:
    """Whether sandboxed commands in `workspace` could write `directory`."""
    root, real = os.path.realpath(workspace), os.path.realpath(directory)
    kept = os.path.join(root, ".git")  # bound read-only in the sandbox (actors/tools/sandbox.py)
    return _within(real, root) and not _within(real, kept)


def _within(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


# The options of bubblewrap's that `_sandboxed` uses (`--ro-bind-data` among them, which the
# tools' sandbox does not use).
GIT_SANDBOX_OPTIONS = (
    "--new-session", "--die-with-parent", "--cap-drop", "--unshare-pid", "--unshare-ipc",
    "--unshare-net", "--ro-bind", "--dev", "--proc", "--bind", "--ro-bind-data", "--tmpfs",
    "--remount-ro", "--chdir",
)  # fmt: skip


def git_sandbox_problem() -> SandboxProblem | None:
    """Why Grove's git runs without its sandbox here (None: it runs in one): no bubblewrap that
    works, or one without an option the sandbox uses. Synchronous: for `grove doctor`."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return SandboxProblem("`bwrap` is not on PATH", UPGRADE_BWRAP)
    lacking = lacked(bwrap, GIT_SANDBOX_OPTIONS)
    if lacking is not None:
        return SandboxProblem(lacking, UPGRADE_BWRAP)
    return sandbox_problem()  # whether it starts one here


_bwraps: dict[str, str | None] = {}  # PATH -> the bwrap on it that works (None: none)


async def _working_bwrap() -> str | None:
    """The bubblewrap Grove's git runs in, once shown to work in this process; None when there
    is none that works or it lacks an option the sandbox uses (git runs unsandboxed then, with
    its fixed configuration and refusals still)."""
    path = os.environ.get("PATH", os.defpath)
    if path not in _bwraps:
        problem = await asyncio.to_thread(git_sandbox_problem)
        _bwraps[path] = shutil.which("bwrap", path=path) if problem is None else None
    return _bwraps[path]


_formats: dict[str, str] = {}  # common git directory -> its object format (sha1, sha256)


async def _object_format(common_dir: str) -> str:
    if common_dir not in _formats:
        _, said = await git(common_dir, f"--git-dir={common_dir}", "rev-parse",
                            "--show-object-format")  # fmt: skip
        _formats[common_dir] = said
    return _formats[common_dir]


def _config_pipe(common_dir: str, object_format: str) -> int | None:
    """The read end of a pipe holding Grove's config for the repository in `common_dir`, of
    `object_format` (None: the repository has no config of its own to stand in for)."""
    if not os.path.exists(os.path.join(common_dir, "config")):
        return None
    read, write = os.pipe()
    with os.fdopen(write, "w") as sink:
        sink.write(_CONFIG.format(object_format))
    return read


def _sandboxed(
    bwrap: str, cwd: str, common_dir: str | None, config: int | None, command: Sequence[str]
) -> list[str]:
    """`command` in a sandbox: the file system read-only but `common_dir`, whose config is
    Grove's (read from `config`), no network, the user's secrets hidden."""
    arguments = [bwrap, "--new-session", "--die-with-parent", "--cap-drop", "ALL"]
    arguments += ["--unshare-pid", "--unshare-ipc", "--unshare-net"]
    arguments += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    seen = [os.path.realpath(cwd)]
    if common_dir is not None:
        real = os.path.realpath(common_dir)
        arguments += ["--bind", real, real]
        seen.append(real)
        if config is not None:
            arguments += ["--ro-bind-data", str(config), os.path.join(real, "config")]
    for secret in map(str, secret_paths(SandboxPolicy(), os.environ)):
        if any(_within(place, secret) for place in seen):
            continue  # where git works: not hidden from it
        if os.path.isdir(secret):
            arguments += ["--tmpfs", secret, "--remount-ro", secret]
        else:
            arguments += ["--ro-bind", "/dev/null", secret]
    return [*arguments, "--chdir", cwd, "--", *command]
