"""The sandbox (actors/tools/sandbox*.py): without a working bubblewrap, `bash` refuses
and says how to install it or turn the sandbox off; the policy's mounts come in the order that
makes them hold (fresh /tmp, then the root, then the secrets over everything).
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from grove.actors.errors import ToolError
from grove.actors.sandbox_limits import SandboxLimits
from grove.actors.tools.editing import editing_tools
from grove.actors.tools.sandbox import SandboxPolicy, bwrap_arguments
from grove.actors.tools.sandbox_check import sandbox_problem
from tests.conftest import bwrap_version, bwrap_without, path_without


async def test_without_bwrap_bash_refuses_and_says_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", path_without(tmp_path, "bwrap"))
    text = await bash_refusal(tmp_path)
    assert text.startswith("Tools run commands in a bubblewrap sandbox, and `bwrap` is not on PATH")
    assert "sudo apt install bubblewrap" in text and '[tools.sandbox] mode = "off"' in text
    assert not (tmp_path / "made").exists()
    off = editing_tools(tmp_path, SandboxPolicy(mode="off"))["bash"]
    assert await off.run({"command": "echo hi"}) == "exit code 0\nhi\n"
    problem = sandbox_problem()
    assert problem is not None and str(problem) == text


async def test_a_bwrap_that_cannot_make_namespaces_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "bin" / "bwrap"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:{path_without(tmp_path, 'bwrap')}")
    text = await bash_refusal(tmp_path)
    assert text.startswith(
        f"{fake} could not start a sandbox here: bwrap: No permissions to create new namespace."
    )
    assert "user namespaces" in text


async def test_a_bwrap_without_an_option_the_sandbox_uses_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", bwrap_without(tmp_path, "--block-fd"))
    text = await bash_refusal(tmp_path)
    shim = f"{bwrap_version()} ({shutil.which('bwrap')})"
    assert text == str(sandbox_problem())
    assert text == (
        f"Tools run commands in a bubblewrap sandbox, and {shim} has no --block-fd. Install "
        "bubblewrap 0.2 or newer, first on PATH (Debian, Ubuntu: sudo apt install bubblewrap); "
        'or run commands without a sandbox: [tools.sandbox] mode = "off".'
    )


async def bash_refusal(workspace: Path) -> str:
    """What `bash` says when it refuses to run (its sandbox cannot start)."""
    with pytest.raises(ToolError) as refused:
        await editing_tools(workspace)["bash"].run({"command": "echo hi"})
    return str(refused.value)


def test_a_working_bwrap_is_no_problem() -> None:
    assert sandbox_problem() is None


def test_secrets_are_hidden_after_the_root_is_mounted(tmp_path: Path) -> None:
    root, secret, in_tmp = tmp_path / "root", tmp_path / "root" / ".ssh", Path("/tmp/ray")
    secret.mkdir(parents=True)
    (root / ".git").mkdir()
    policy = SandboxPolicy()
    arguments = bwrap_arguments("bwrap", policy, root, ["true"], [secret, in_tmp])
    first = arguments.index
    assert first("/tmp") < first(str(root)) < first(str(root / ".git")) < first(str(secret))
    assert str(in_tmp) not in arguments  # the sandbox's /tmp is its own: nothing to hide there
    assert "--unshare-net" in arguments and arguments[-3:] == [str(root), "--", "true"]
    read_only = bwrap_arguments("bwrap", SandboxPolicy(mode="read-only"), root, ["true"], [])
    assert "--bind" not in read_only and "--ro-bind" in read_only
    networked = bwrap_arguments("bwrap", SandboxPolicy(network=True), root, ["true"], [])
    assert "--unshare-net" not in networked and "/run" not in networked


def test_the_config_sets_the_hosts_policy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from grove.supervisor.config import load_settings
    from grove.supervisor.deployment import sandbox_policy
    from grove.supervisor.errors import ConfigError

    monkeypatch.setenv("GROVE_CONFIG_FILE", str(tmp_path / "config.toml"))
    (tmp_path / "config.toml").write_text(
        '[tools.sandbox]\nmode = "read-only"\nnetwork = true\nhidden = ["/srv/keys"]\n'
        'cpu_s = 30\nenv = ["PROJECT_FLAG"]\n'
    )
    store = tmp_path / "grove.sqlite3"
    policy = sandbox_policy(load_settings(store=f"sqlite:///{store}"))
    assert policy.mode == "read-only" and policy.network and policy.writable == ()
    assert policy.limits == SandboxLimits(cpu_s=30) and policy.env == ("PROJECT_FLAG",)
    assert policy.hidden == ("/srv/keys", str(store), f"{store}-wal", f"{store}-shm")
    monkeypatch.setenv("GROVE_TOOLS__SANDBOX__MODE", "sideways")
    with pytest.raises(ConfigError, match=r"tools.sandbox.mode: Input should be 'workspace-write'"):
        load_settings()


async def test_a_command_cannot_make_the_workspace_a_repository_of_its_own(
    tmp_path: Path,
) -> None:
    """Grove's own git runs in the workspace (a fork into worktrees): a repository a command
    made there would have it run that repository's filters, so while commands run, a root
    without `.git` has a read-only empty one (git looks past it, to the repository above);
    the last command to end takes it away, so the workspace is not left looking like a
    repository (WATCHDOG.md discovery stops at a `.git`)."""
    from grove.actors.tools.sandbox_run import run_process

    root = tmp_path / "root"
    root.mkdir()
    slow = asyncio.create_task(
        run_process(["sleep", "3"], root, SandboxPolicy(), 30.0, lambda _: None)
    )
    plant = "git init -q . && git config filter.x.clean 'touch escaped' && echo planted"
    said: list[bytes] = []
    code = await run_process(["sh", "-c", plant], root, SandboxPolicy(), 30.0, said.append)
    assert code != 0 and b"planted" not in b"".join(said)
    assert list((root / ".git").iterdir()) == []  # still the mount point of the slow one
    assert await slow == 0
    assert not (root / ".git").exists()
    (root / ".git").mkdir()  # the workspace's own: kept
    assert await run_process(["true"], root, SandboxPolicy(), 30.0, said.append) == 0
    assert (root / ".git").is_dir()


async def test_a_bwrap_without_size_runs_with_unsized_file_systems(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bubblewrap before 0.8 refuses `--size`: the sandbox still starts, its /tmp unsized."""
    import shutil

    real = shutil.which("bwrap")
    fake = tmp_path / "bin" / "bwrap"
    fake.parent.mkdir()
    fake.write_text(
        '#!/bin/sh\ncase " $* " in *" --size "*) echo "bwrap: Unknown option --size" >&2; '
        f'exit 1;; esac\nexec {real} "$@"\n'
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:{path_without(tmp_path, 'bwrap')}")
    output = await editing_tools(tmp_path)["bash"].run({"command": "df --output=size /tmp"})
    assert isinstance(output, str) and output.startswith("exit code 0\n")
    assert int(output.split()[-1]) > 256 * 1024  # KiB: not the policy's 256 MB
    sized = bwrap_arguments("bwrap", SandboxPolicy(), tmp_path, ["true"], [])
    assert sized[sized.index("/tmp") - 3 : sized.index("/tmp")] == [
        "--size",
        str(256 << 20),
        "--tmpfs",
    ]
