"""The sandbox of every process a tool starts: `SandboxPolicy` (a value), `bwrap_arguments`
(the policy as bubblewrap's command line) and `run_process`, the one way tools start processes.

Nothing else in actors/tools/ starts a process; the environment a process gets is made here,
and the limits a sandbox's processes are held to (actors/sandbox_limits.py) are put on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, get_args

from grove.actors.agent import ToolError
from grove.actors.sandbox_limits import (
    MB,
    SandboxCgroup,
    SandboxLimits,
    born_in,
    hold,
    release_cgroup,
    sandbox_cgroup,
)
from grove.actors.tools.pipes import closed, exited, kill_group, stream
from grove.providers.credentials import API_KEY_ENV, config_dir

SandboxMode = Literal["workspace-write", "read-only", "off"]
SANDBOX_MODES: tuple[str, ...] = get_args(SandboxMode)
KILL_GRACE_S = 2.0
# Under the home directory: where people keep keys, tokens and cloud credentials.
HOME_SECRETS = (
    ".ssh",
    ".aws",
    ".config/gcloud",
    ".azure",
    ".kube",
    ".docker",
    ".gnupg",
    ".netrc",
    ".git-credentials",
    ".config/gh",
    ".ray",  # Ray's auth token
    # Package registries' tokens and database passwords.
    ".npmrc",
    ".pypirc",
    ".pgpass",
    ".cargo/credentials.toml",
    ".cargo/credentials",
    ".gem/credentials",
)
# Variables naming files whose contents are secret.
SECRET_FILE_VARIABLES = ("RAY_AUTH_TOKEN_PATH", "GROVE_CONFIG_FILE")
# The only variables of Grove's environment a process gets, with the locale's LC_* and those
# `[tools.sandbox] env` names (never a provider's key).
ENVIRONMENT = frozenset(
    ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "LANGUAGE", "TZ", "TMPDIR")
)
# Where Ray keeps its sessions (sockets, logs) unless told otherwise: under RAY_TMPDIR, TMPDIR
# or /tmp (ray._common.utils.get_default_ray_temp_dir).
RAY_TEMP_PARENTS = ("RAY_TMPDIR", "TMPDIR")
KEY_VARIABLES = frozenset(name for names in API_KEY_ENV.values() for name in names)


# The options of bubblewrap's the tools' sandbox uses (`--size` aside: without it its file systems
# in memory go unsized), each there since bubblewrap 0.2.
SANDBOX_OPTIONS = (
    "--new-session", "--die-with-parent", "--cap-drop", "--unshare-pid", "--unshare-ipc",
    "--unshare-net", "--ro-bind", "--dev", "--proc", "--tmpfs", "--remount-ro", "--bind",
    "--chdir", "--info-fd", "--block-fd",
)  # fmt: skip
UPGRADE_BWRAP = (
    "Install bubblewrap 0.2 or newer, first on PATH (Debian, Ubuntu: sudo apt install bubblewrap)"
)
_LISTED_OPTION = re.compile(r"^\s+(--[\w-]+)", re.MULTILINE)


class SandboxUnavailable(ToolError):
    """The sandbox cannot start here; the text says why and how to fix it."""


@dataclass(frozen=True, kw_only=True, slots=True)
class SandboxPolicy:
    """What a tool's process may do. `workspace-write`: write in its root only; `read-only`:
    write nowhere (but a private /tmp); `off`: no sandbox. `network`: reach the network;
    `writable` and `hidden`: more paths to open for writing, or to hide; `limits`: what its
    processes may use; `env`: more variables of Grove's environment to pass on."""

    mode: SandboxMode = "workspace-write"
    network: bool = False
    writable: tuple[str, ...] = ()
    hidden: tuple[str, ...] = ()
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    env: tuple[str, ...] = ()

    @property
    def sandboxed(self) -> bool:
        return self.mode != "off"


def secret_paths(policy: SandboxPolicy, environ: Mapping[str, str]) -> list[Path]:
    """What the sandbox hides, as real paths that exist: Grove's config directory (keys,
    the service token), secrets under the home directory, the files that variables name, Ray's
    temp directories. Looked for on every call (a secret made since the last one is hidden
    too), as strings: this runs before every command a tool starts."""
    home = environ.get("HOME") or str(Path.home())
    named = [environ[name] for name in SECRET_FILE_VARIABLES if environ.get(name)]
    ray_parents = [environ[name] for name in RAY_TEMP_PARENTS if environ.get(name)]
    candidates = [
        str(config_dir(environ)),
        *(os.path.join(home, entry) for entry in HOME_SECRETS),
        *named,
        *(os.path.join(parent, "ray") for parent in (*ray_parents, "/tmp")),
        *policy.hidden,
    ]
    found = dict.fromkeys(os.path.realpath(path) for path in candidates if os.path.lexists(path))
    return [Path(path) for path in found]


def bwrap_arguments(
    bwrap: str,
    policy: SandboxPolicy,
    root: Path,
    command: Sequence[str],
    hidden: Sequence[Path],
    *,
    sized: bool = True,
) -> list[str]:
    """The command line that runs `command` in `root` under `policy`. Order matters: each
    mount covers the ones before it, so the secrets are hidden last. The file systems made
    for it in memory (its /tmp, /run and /dev/shm) are each of the policy's size when
    `sized` (bubblewrap 0.8 and later), and /dev is read-only but for its devices."""
    arguments = [bwrap, "--new-session", "--die-with-parent", "--cap-drop", "ALL"]
    arguments += ["--unshare-pid", "--unshare-ipc"]
    if not policy.network:
        arguments.append("--unshare-net")
    arguments += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    size = ["--size", str(policy.limits.tmp_mb * MB)] if sized else []
    arguments += [*size, "--tmpfs", "/dev/shm", "--remount-ro", "/dev"]
    fresh = ["/tmp"] if policy.network else ["/tmp", "/run"]  # /run: the services' sockets
    for directory in fresh:
        arguments += [*size, "--tmpfs", directory]
    real_root = os.path.realpath(root)
    shown = [real_root]  # what is seen again through the fresh directories
    if policy.mode == "workspace-write":
        arguments += ["--bind", real_root, real_root]
        for path in policy.writable:
            if os.path.exists(path):
                real = os.path.realpath(path)
                arguments += ["--bind", real, real]
                shown.append(real)
        git = os.path.join(real_root, ".git")
        if os.path.lexists(git):  # its hooks and config would run outside the sandbox
            arguments += ["--ro-bind", git, git]
        else:  # nor may a command make one: Grove's own git, run there, would obey it
            arguments += ["--tmpfs", git, "--remount-ro", git]
    else:
        arguments += ["--ro-bind", real_root, real_root]
    for secret in map(str, hidden):
        if _under(secret, fresh) and not _under(secret, shown):
            continue  # out of sight already
        if os.path.isdir(secret):
            arguments += ["--tmpfs", secret, "--remount-ro", secret]
        else:
            arguments += ["--ro-bind", "/dev/null", secret]
    return [*arguments, "--chdir", real_root, "--", *command]


def _under(path: str, directories: Sequence[str]) -> bool:
    """Whether `path` is one of `directories` or inside one (all absolute and normalised)."""
    return any(path == d or path.startswith(d.rstrip("/") + "/") for d in directories)


def command_environment(policy: SandboxPolicy) -> dict[str, str]:
    """What a process gets of the host's environment: `ENVIRONMENT`, the locale's LC_*
    variables and those the policy names; nothing else (a token in a variable Grove never
    heard of stays out too)."""
    named = {*ENVIRONMENT, *policy.env}
    return {
        name: value
        for name, value in os.environ.items()
        if (name in named or name.startswith("LC_")) and name not in KEY_VARIABLES
    }


@dataclass(frozen=True, slots=True)
class SandboxProblem:
    """Why the sandbox cannot run here, and how to fix that."""

    what: str
    fix: str

    def __str__(self) -> str:
        return f"{self.what}. {self.fix}"


def sandbox_problem(environ: Mapping[str, str] | None = None) -> SandboxProblem | None:
    """Why the sandbox cannot run here (no `bwrap` on PATH, or it fails to start one); None
    when it can. Runs bubblewrap once or twice, synchronously: for `grove doctor`."""
    env = os.environ if environ is None else environ
    bwrap = shutil.which("bwrap", path=env.get("PATH"))
    if bwrap is None:
        return MISSING
    lacking = lacked(bwrap, SANDBOX_OPTIONS)
    if lacking is not None:
        return _lacking(lacking)
    problem = ""
    for sized in (True, False):
        try:
            done = subprocess.run(
                _probe(bwrap, sized), capture_output=True, timeout=30, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return _broken(bwrap, str(exc))
        problem = done.stderr.decode(errors="replace").strip() if done.returncode else ""
        if not _unsized(problem):
            break
    return _broken(bwrap, problem) if problem else None


def missing_options(help_text: str, needed: Sequence[str]) -> list[str]:
    """Those of the options `needed` that bubblewrap's `--help` (`help_text`) does not list."""
    listed = set(_LISTED_OPTION.findall(help_text))
    return [option for option in needed if option not in listed]


def lacked(bwrap: str, needed: Sequence[str]) -> str | None:
    """Which of the options `needed` `bwrap` lacks, in a phrase naming its version (None: it
    has them all, or it cannot say: then starting a sandbox tells what is wrong)."""
    try:
        said = [
            subprocess.run([bwrap, flag], capture_output=True, timeout=30, check=True).stdout
            for flag in ("--help", "--version")
        ]
    except (OSError, subprocess.SubprocessError):
        return None
    help_text, version = (text.decode(errors="replace").strip() for text in said)
    return lacking_text(bwrap, version, missing_options(help_text, needed))


def lacking_text(bwrap: str, version: str, missing: Sequence[str]) -> str | None:
    """`bubblewrap 0.1.1 (/usr/bin/bwrap) has no --ro-bind-data` (None: nothing missing)."""
    return f"{version or 'bwrap'} ({bwrap}) has no {', '.join(missing)}" if missing else None


def _lacking(lacking: str) -> SandboxProblem:
    return SandboxProblem(
        f"Tools run commands in a bubblewrap sandbox, and {lacking}",
        f'{UPGRADE_BWRAP}; or run commands without a sandbox: [tools.sandbox] mode = "off".',
    )


# bwrap path -> why it cannot start a sandbox (None: it can), and whether it sizes file systems
_working: dict[str, tuple[str | None, bool]] = {}


_found_on: dict[str, str] = {}  # PATH -> the bwrap on it (looked for again while there is none)


async def _checked_bwrap() -> tuple[str, bool]:
    """The `bwrap` on PATH, once shown to start a sandbox in this process; and whether it
    takes `--size` (bubblewrap before 0.8 does not: its file systems in memory go unsized)."""
    path = os.environ.get("PATH", os.defpath)
    bwrap = _found_on.get(path) or shutil.which("bwrap", path=path)
    if bwrap is None:
        raise SandboxUnavailable(str(MISSING))
    _found_on[path] = bwrap
    if bwrap not in _working:
        lacking = await asyncio.to_thread(lacked, bwrap, SANDBOX_OPTIONS)
        if lacking is not None:
            raise SandboxUnavailable(str(_lacking(lacking)))
        problem = await _probe_problem(bwrap, sized=True)
        sized = not _unsized(problem)
        if not sized:
            problem = await _probe_problem(bwrap, sized=False)
        _working[bwrap] = (problem, sized)
    problem, sized = _working[bwrap]
    if problem is not None:
        raise SandboxUnavailable(str(_broken(bwrap, problem)))
    return bwrap, sized


async def _probe_problem(bwrap: str, sized: bool) -> str | None:
    process = await asyncio.create_subprocess_exec(
        *_probe(bwrap, sized),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    _, errors = await process.communicate()
    return errors.decode(errors="replace").strip() if process.returncode != 0 else None


def _unsized(problem: str | None) -> bool:
    """Whether bubblewrap refused `--size` (an option of 0.8 and later)."""
    return problem is not None and "--size" in problem


def _probe(bwrap: str, sized: bool) -> list[str]:
    policy = SandboxPolicy(mode="read-only")
    return bwrap_arguments(bwrap, policy, Path("/"), ["true"], [], sized=sized)


MISSING = SandboxProblem(
    "Tools run commands in a bubblewrap sandbox, and `bwrap` is not on PATH",
    "Install bubblewrap (Debian, Ubuntu: sudo apt install bubblewrap; Fedora: sudo dnf install "
    "bubblewrap; Arch: sudo pacman -S bubblewrap), or run commands without a sandbox: "
    '[tools.sandbox] mode = "off" in config.toml (or GROVE_TOOLS__SANDBOX__MODE=off).',
)


def _broken(bwrap: str, problem: str) -> SandboxProblem:
    return SandboxProblem(
        f"{bwrap} could not start a sandbox here: {problem or 'it gave no reason'}",
        "It needs user namespaces (sysctl kernel.unprivileged_userns_clone=1, or a container "
        'allowed to make them); or run commands without a sandbox: [tools.sandbox] mode = "off".',
    )


async def run_process(
    command: Sequence[str],
    root: Path,
    policy: SandboxPolicy,
    timeout_s: float,
    take: Callable[[bytes], None],
) -> int:
    """Run `command` in `root` under `policy` with stdin closed; its output (stdout and
    stderr together) goes to `take` as it comes; its exit code. A sandbox's first process
    waits until it is held to the policy's limits. At the timeout (TimeoutError) or when
    cancelled, its whole process group, and with it the sandbox and everything in it, is
    killed first."""
    with _git_mount_point(root, policy):
        environment = command_environment(policy)
        argv = list(command)
        passed: tuple[int, ...] = ()
        cgroup: SandboxCgroup | None = None
        if policy.sandboxed:
            bwrap, sized = await _checked_bwrap()
            hidden = secret_paths(policy, os.environ)
            argv = bwrap_arguments(bwrap, policy, root, argv, hidden, sized=sized)
            environment["TMPDIR"] = "/tmp"  # the sandbox's own
            info, info_to_us = os.pipe()  # bubblewrap says there the pid of the sandbox's first
            go_from_us, go = os.pipe()  # which waits for a byte here before it runs anything
            passed = (info_to_us, go_from_us)
            at = argv.index("--")  # bwrap's, before the command
            argv[at:at] = ["--info-fd", str(info_to_us), "--block-fd", str(go_from_us)]
            cgroup = sandbox_cgroup(policy.limits)
        try:
            process = _started(argv, root, environment, passed, cgroup)
        except BaseException:
            if passed:
                closed(info, go)
            if cgroup is not None:
                release_cgroup(cgroup)
            raise
        finally:
            closed(*passed)
        assert process.stdout is not None
        try:
            async with asyncio.timeout(timeout_s):
                if passed:
                    await _let_go(info, go, policy.limits, cgroup)
                await stream(process.stdout.fileno(), take)
                return await exited(process)
        except BaseException:  # the timeout, or the turn was cancelled
            # Before `go` closes: a sandbox still waiting to be let go dies waiting.
            await kill_group(process, KILL_GRACE_S)
            raise
        finally:
            process.stdout.close()
            if passed:
                closed(info, go)
            if cgroup is not None:
                release_cgroup(cgroup)


# `.git` mount points this process's sandboxes made in workspaces that have none (bubblewrap
# makes the directory it mounts a read-only tmpfs on), with how many running sandboxes use
# each: the last to end removes it, so no workspace is left looking like a repository.
_made_git_points: dict[str, int] = {}


@contextlib.contextmanager
def _git_mount_point(root: Path, policy: SandboxPolicy) -> Iterator[None]:
    git = os.path.join(os.path.realpath(root), ".git")
    if (
        not policy.sandboxed
        or policy.mode != "workspace-write"
        or (git not in _made_git_points and os.path.lexists(git))
    ):
        yield
        return
    _made_git_points[git] = _made_git_points.get(git, 0) + 1
    try:
        yield
    finally:
        _made_git_points[git] -= 1
        if not _made_git_points[git]:
            del _made_git_points[git]
            with contextlib.suppress(OSError):  # gone, or not empty: not the mount point
                os.rmdir(git)


def _started(
    argv: list[str],
    root: Path,
    environment: dict[str, str],
    passed: tuple[int, ...],
    cgroup: SandboxCgroup | None,
) -> subprocess.Popen[bytes]:
    with born_in(cgroup):
        return subprocess.Popen(
            argv,
            cwd=root,
            env=environment,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, killed whole
            pass_fds=passed,
        )


async def _let_go(info: int, go: int, limits: SandboxLimits, cgroup: SandboxCgroup | None) -> None:
    """Once bubblewrap has said the pid of the sandbox's first process (waiting to be let
    go), hold that process to `limits`, then let it go. When bubblewrap said nothing it
    failed: its error is the output."""
    said: list[bytes] = []
    await stream(info, said.append)
    if said:
        try:
            await hold(json.loads(b"".join(said))["child-pid"], limits, cgroup)
        except PermissionError as exc:
            raise SandboxUnavailable(f"the sandbox's limits could not be set: {exc}") from exc
    with contextlib.suppress(BrokenPipeError):
        os.write(go, b"1")
