"""The sandbox of a tool's processes as a value: `SandboxPolicy`, the secrets it hides, its
bubblewrap command line and the environment a process gets. Starting one is sandbox_run.py's.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, get_args

from grove.actors.errors import ToolError
from grove.actors.sandbox_limits import (
    MB,
    SandboxLimits,
)
from grove.providers.credentials import API_KEY_ENV, config_dir

SandboxMode = Literal["workspace-write", "read-only", "off"]
SANDBOX_MODES: tuple[str, ...] = get_args(SandboxMode)
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
