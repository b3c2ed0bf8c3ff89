"""What a sandbox's processes may use (`[tools.sandbox]` processes, memory_mb, file_size_mb,
cpu_s, tmp_mb): a fork bomb and a 600 MB write fail inside while another agent of the host
keeps streaming; memory, CPU time and file size stop where the policy says; `grove doctor` says
when the number of processes cannot be limited. And what a sandbox sees of Ray: nothing of its
temp folder, whatever the workspace is. Real bwrap, real Ray.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import ray

from grove.actors.sandbox_limits import SandboxLimits
from grove.actors.tools.editing import editing_tools
from grove.actors.tools.sandbox import SandboxPolicy
from grove.supervisor import Grove
from tests.integration.groves import (
    cli_environment,
    largest_gap,
    running_grove,
    sim_call,
    streaming_beside,
    tool_results,
)

# Forks children that wait, until a fork fails or `limit` + 64 of them are made; says how many.
FORKER = """
import os, sys, time
made = 0
try:
    while made < int(sys.argv[1]) + 64:
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
        made += 1
    print("made", made)
except OSError as exc:
    print("refused after", made, exc.strerror)
"""


async def bash(root: Path, command: str, policy: SandboxPolicy, timeout_s: float = 60) -> str:
    output = await editing_tools(root, policy)["bash"].run(
        {"command": command, "timeout_s": timeout_s}
    )
    assert isinstance(output, str)
    return output


def limited(**limits: int) -> SandboxPolicy:
    return SandboxPolicy(limits=SandboxLimits(**limits))


async def test_processes_stop_at_the_limit(tmp_path: Path) -> None:
    (tmp_path / "forker.py").write_text(FORKER)
    output = await bash(tmp_path, "python3 forker.py 64", limited(processes=64))
    refused = re.search(r"refused after (\d+) Resource temporarily unavailable", output)
    assert refused is not None, output
    assert int(refused.group(1)) < 64


async def test_a_600_mb_write_fails_in_each_file_system_in_memory(tmp_path: Path) -> None:
    """/tmp, /run and /dev/shm are the sandbox's own, in memory: 256 MB each by default."""
    for place in ("/tmp", "/run", "/dev/shm"):
        command = f"head -c 600M /dev/zero > {place}/big; echo $?; stat -c %s {place}/big"
        output = await bash(tmp_path, command, SandboxPolicy())
        assert "No space left on device" in output, output
        assert output.splitlines()[-2:] == ["1", str(256 << 20)], output


async def test_a_file_stops_at_its_size_limit(tmp_path: Path) -> None:
    output = await bash(tmp_path, "head -c 600M /dev/zero > big", limited(file_size_mb=16))
    assert "File size limit exceeded" in output, output
    assert (tmp_path / "big").stat().st_size == 16 << 20


async def test_memory_and_cpu_time_stop_where_the_policy_says(tmp_path: Path) -> None:
    allocate = "python3 -c 'bytearray(1 << 30); print(\"allocated\")'"
    output = await bash(tmp_path, allocate, limited(memory_mb=512))
    assert "MemoryError" in output and "allocated" not in output, output
    assert "allocated" in await bash(tmp_path, allocate, SandboxPolicy())
    spin = "bash -c 'while :; do :; done'; echo ended $?"
    output = await bash(tmp_path, spin, limited(cpu_s=1), timeout_s=30)
    assert "CPU time limit exceeded" in output and "ended 152" in output, output


async def test_the_limits_are_the_policys(tmp_path: Path) -> None:
    policy = limited(processes=100, memory_mb=1000, file_size_mb=10, cpu_s=20)
    output = await bash(tmp_path, "ulimit -u; ulimit -v; ulimit -f; ulimit -t", policy)
    assert output.splitlines()[1:] == ["100", str(1000 * 1024), str(10 * 1024), "20"]


def ray_temp_dir() -> Path:
    node = ray._private.worker.global_worker.node
    assert node is not None
    return Path(node.get_temp_dir_path())


@pytest.fixture(scope="module")
def grove(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Grove]:
    """One host, working in /tmp (where Ray keeps its temp folder unless told otherwise)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir("/tmp")
        with running_grove(tmp_path_factory.mktemp("store"), hosts=1) as grove:
            yield grove


async def test_rays_temp_folder_is_hidden_whatever_the_workspace(grove: Grove) -> None:
    """The sandbox hides Ray's folder itself (its default places), not only when a host
    names it: here no one does, and the workspace holds it."""
    temp = ray_temp_dir()
    assert any(temp.iterdir())  # sockets, logs and the session of the running Ray
    for workspace in {Path("/tmp"), temp.parent}:
        output = await bash(workspace, f"ls -A {temp}; echo listed", SandboxPolicy())
        assert output == "exit code 0\nlisted\n", output


def test_a_fork_bomb_fails_inside_while_the_host_streams(grove: Grove) -> None:
    """The bomb's shell counts its refusals with builtins (a fork may be refused to it too)."""
    bomber = grove.create_root("gpt-5-mini", tools=["bash"], allow=["bash"]).uuid
    bomb = (
        "(:(){ :|:& };:) 2>/tmp/bomb.log; SECONDS=0; while (( SECONDS < 8 )); do :; done; "
        'n=0; while read -r line; do [[ $line == *"Resource temporarily unavailable"* ]] '
        "&& n=$((n + 1)); done < /tmp/bomb.log; echo refused $n times"
    )
    with streaming_beside(grove) as arrivals:
        asked = grove.ask(bomber, sim_call("bash", command=bomb, timeout_s=60), timeout_s=120)
    assert asked.ok, asked.error
    assert largest_gap(arrivals) < 2.0
    after = f"ls -A {ray_temp_dir()}; pwd"
    assert grove.ask(bomber, sim_call("bash", command=after), timeout_s=60).ok
    bombed, listed = (part["content"] for part in tool_results(grove, bomber))
    refused = re.search(r"refused (\d+) times", bombed)
    assert refused is not None and int(refused.group(1)) > 0, bombed
    assert listed == "exit code 0\n/tmp\n"  # the host's workspace, without Ray's folder


# Runs its arguments in a mount namespace of its own where every cgroup file system is read-only.
CGROUPS_READ_ONLY = (
    "for m in $(awk '$3 ~ /^cgroup/ {print $2}' /proc/self/mounts); do "
    'mount -o remount,bind,ro "$m"; done; exec "$@"'
)


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None,
    reason="root makes a mount namespace whose cgroups it may not write",
)
def test_doctor_says_when_root_cannot_limit_processes(tmp_path: Path) -> None:
    """For root the kernel does not enforce RLIMIT_NPROC: without a pids cgroup it may make,
    nothing limits a sandbox's process count, and `grove doctor` says so with the fix."""
    private = ["unshare", "--mount", "--propagation", "private", "sh", "-c", CGROUPS_READ_ONLY]
    done = subprocess.run(
        [*private, "sh", sys.executable, "-m", "grove.cli.entry", "doctor"],
        capture_output=True, text=True, env=cli_environment(tmp_path), timeout=180, check=False,
    )  # fmt: skip
    lines = done.stdout.splitlines()
    (at,) = [index for index, line in enumerate(lines) if line.split()[1:2] == ["sandbox"]]
    assert lines[at] == (
        "warn  sandbox     workspace-write, without network (bubblewrap); run as root with no "
        "pids cgroup Grove may make, processes not limited"
    ), done.stdout
    assert lines[at + 1].strip() == (
        "fix: run Grove as a user other than root, or let it write a pids cgroup of its own"
    )
