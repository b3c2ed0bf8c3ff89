"""Whether bubblewrap can start the tools' sandbox here: asked once per process before a tool
runs one, or on demand for `grove doctor`, with what to do when it cannot.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from grove.actors.tools.sandbox import SandboxPolicy, SandboxUnavailable, bwrap_arguments

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


async def checked_bwrap() -> tuple[str, bool]:
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
