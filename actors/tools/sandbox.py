"""The sandbox of every process a tool starts: `SandboxPolicy` (a value), `bwrap_arguments`
(the policy as bubblewrap's command line) and `run_process`, the one way tools start processes.

Nothing else in actors/tools/ starts a process; the environment a process gets is made here.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

from actors.agent import ToolError
from providers.credentials import API_KEY_ENV, config_dir

SandboxMode = Literal["workspace-write", "read-only", "off"]
SANDBOX_MODES: tuple[str, ...] = get_args(SandboxMode)
KILL_GRACE_S = 2.0
READ_CHUNK_BYTES = 1 << 16
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
# Variables a process never sees: the providers' keys, and anything named like one (HEADERS:
# an OTLP exporter's, `authorization=Bearer ...` often).
_KEY_VARIABLES = frozenset(name for names in API_KEY_ENV.values() for name in names)
_SECRET_NAME = re.compile("API_KEY|TOKEN|SECRET|PASSWORD|HEADERS")  # in a name, upper-cased
# A URL with a password in it (a store's `redis://:PASSWORD@host`, a database's URL).
_URL_WITH_PASSWORD = re.compile(r"://[^/\s@:]*:[^/\s@]+@")


class SandboxUnavailable(ToolError):
    """The sandbox cannot start here; the text says why and how to fix it."""


@dataclass(frozen=True, kw_only=True, slots=True)
class SandboxPolicy:
    """What a tool's process may do. `workspace-write`: write in its root only; `read-only`:
    write nowhere (but a private /tmp); `off`: no sandbox. `network`: reach the network;
    `writable` and `hidden`: more paths to open for writing, or to hide."""

    mode: SandboxMode = "workspace-write"
    network: bool = False
    writable: tuple[str, ...] = ()
    hidden: tuple[str, ...] = ()

    @property
    def sandboxed(self) -> bool:
        return self.mode != "off"


def secret_paths(policy: SandboxPolicy, environ: Mapping[str, str]) -> list[Path]:
    """What the sandbox hides, as real paths that exist: Grove's config directory (keys,
    the service token), secrets under the home directory, the files that variables name.
    Looked for on every call (a secret made since the last one is hidden too), as strings:
    this runs before every command a tool starts."""
    home = environ.get("HOME") or str(Path.home())
    named = [environ[name] for name in SECRET_FILE_VARIABLES if environ.get(name)]
    candidates = [
        str(config_dir(environ)),
        *(os.path.join(home, entry) for entry in HOME_SECRETS),
        *named,
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
) -> list[str]:
    """The command line that runs `command` in `root` under `policy`. Order matters: each
    mount covers the ones before it, so the secrets are hidden last."""
    arguments = [bwrap, "--new-session", "--die-with-parent", "--cap-drop", "ALL"]
    arguments += ["--unshare-pid", "--unshare-ipc"]
    if not policy.network:
        arguments.append("--unshare-net")
    arguments += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    fresh = ["/tmp"] if policy.network else ["/tmp", "/run"]  # /run: the services' sockets
    for directory in fresh:
        arguments += ["--tmpfs", directory]
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


def command_environment() -> dict[str, str]:
    """The host's environment without the providers' keys, anything named like a secret, or a
    URL with a password in it (GROVE_STORE's, for one)."""
    return {
        name: value
        for name, value in os.environ.items()
        if name not in _KEY_VARIABLES
        and not _SECRET_NAME.search(name.upper())
        and not ("@" in value and _URL_WITH_PASSWORD.search(value))
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
    when it can. Runs bubblewrap once, synchronously: for `grove doctor`."""
    import subprocess

    env = os.environ if environ is None else environ
    bwrap = shutil.which("bwrap", path=env.get("PATH"))
    if bwrap is None:
        return MISSING
    try:
        done = subprocess.run(_probe(bwrap), capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return _broken(bwrap, str(exc))
    if done.returncode != 0:
        return _broken(bwrap, done.stderr.decode(errors="replace").strip())
    return None


_working: dict[str, str | None] = {}  # bwrap path -> why it cannot start a sandbox (None: it can)


_found_on: dict[str, str] = {}  # PATH -> the bwrap on it (looked for again while there is none)


async def _checked_bwrap() -> str:
    """The `bwrap` on PATH, once shown to start a sandbox in this process."""
    path = os.environ.get("PATH", os.defpath)
    bwrap = _found_on.get(path) or shutil.which("bwrap", path=path)
    if bwrap is None:
        raise SandboxUnavailable(str(MISSING))
    _found_on[path] = bwrap
    if bwrap not in _working:
        process = await asyncio.create_subprocess_exec(
            *_probe(bwrap),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        _, errors = await process.communicate()
        failed = process.returncode != 0
        _working[bwrap] = errors.decode(errors="replace").strip() if failed else None
    problem = _working[bwrap]
    if problem is not None:
        raise SandboxUnavailable(str(_broken(bwrap, problem)))
    return bwrap


def _probe(bwrap: str) -> list[str]:
    return bwrap_arguments(bwrap, SandboxPolicy(mode="read-only"), Path("/"), ["true"], [])


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
    stderr together) goes to `take` as it comes; its exit code. At the timeout (TimeoutError)
    or when cancelled, its whole process group, and with it the sandbox and everything in
    it, is killed first."""
    environment = command_environment()
    argv = list(command)
    if policy.sandboxed:
        bwrap = await _checked_bwrap()
        argv = bwrap_arguments(bwrap, policy, root, argv, secret_paths(policy, os.environ))
        environment["TMPDIR"] = "/tmp"  # the sandbox's own
    process = await asyncio.create_subprocess_exec(
        *argv,
        cwd=root,
        env=environment,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,  # its own process group, killed whole
    )
    try:
        async with asyncio.timeout(timeout_s):
            assert process.stdout is not None
            while chunk := await process.stdout.read(READ_CHUNK_BYTES):
                take(chunk)
            await process.wait()
    except BaseException:  # the timeout, or the turn was cancelled
        await _kill_group(process)
        raise
    assert process.returncode is not None
    return process.returncode


async def _kill_group(process: asyncio.subprocess.Process) -> None:
    """SIGTERM to the process's whole group, SIGKILL after a grace; then reap it. A sandbox
    dies with bubblewrap, and all that runs in it with the sandbox."""
    for signum in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signum)
        try:
            async with asyncio.timeout(KILL_GRACE_S):
                await process.wait()
        except TimeoutError:
            continue
        if signum == signal.SIGTERM:
            # The leader is gone; whatever it started in the group gets the SIGKILL too.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
        return
