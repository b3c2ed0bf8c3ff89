"""deploy/local/cluster.sh for real: two Ray nodes and Redis on loopback only, `grove batch`
joining that cluster with the Redis store, a batch that loses the worker node halfway and still
finishes every task exactly once, and `stop` ending all that `start` started.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from grove.supervisor.store import open_store
from grove.supervisor.usage import subtree, usage_report
from tests.conformance.corpus import REPO_ROOT

SCRIPT = REPO_ROOT / "deploy" / "local" / "cluster.sh"
START_TIMEOUT_S = 180
STOP_TIMEOUT_S = 120
BATCH_TIMEOUT_S = 240
TASKS = [{"id": n, "prompt": f"[[sim tokens=6]] task {n}"} for n in range(8)]
NODES_PROBE = """
import json, ray
ray.init()
print(json.dumps([
    {"address": n["NodeManagerAddress"], "alive": n["Alive"], "resources": sorted(n["Resources"])}
    for n in ray.nodes()
]))
"""


@dataclass(frozen=True)
class LocalCluster:
    state: Path
    exports: dict[str, str]
    env: dict[str, str]
    pids: dict[str, int]

    def script(
        self, *args: str, timeout_s: float = STOP_TIMEOUT_S
    ) -> subprocess.CompletedProcess[str]:
        return run_script(*args, "--state-dir", str(self.state), timeout_s=timeout_s)

    def grove(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "grove.cli.app", *args],
            capture_output=True,
            text=True,
            env=self.env,
            cwd=REPO_ROOT,
            timeout=BATCH_TIMEOUT_S,
            check=False,
        )

    def nodes(self) -> list[dict[str, Any]]:
        result = subprocess.run(
            [sys.executable, "-c", NODES_PROBE],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=BATCH_TIMEOUT_S,
            check=True,
        )
        nodes: list[dict[str, Any]] = json.loads(result.stdout.splitlines()[-1])
        return nodes


def run_script(*args: str, timeout_s: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


def clean_environment(base: Path) -> dict[str, str]:
    """This process's environment without Grove, Ray or provider settings, and with its own
    config and data directories."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("GROVE_", "RAY_")) and not key.endswith("_API_KEY")
    }
    env.update(
        GROVE_CONFIG_FILE=str(base / "absent-config.toml"),
        XDG_CONFIG_HOME=str(base / "config"),
        XDG_DATA_HOME=str(base / "data"),
    )
    return env


@contextmanager
def local_cluster(base: Path, *options: str) -> Iterator[LocalCluster]:
    """A cluster started by the script in `base`, stopped by the script afterwards."""
    if sys.platform != "linux":
        pytest.skip("deploy/local/cluster.sh is for Linux")
    state = base / "state"
    started = run_script(
        "start", "--state-dir", str(state), "--python", sys.executable, *options,
        timeout_s=START_TIMEOUT_S,
    )  # fmt: skip
    try:
        if started.returncode != 0 and "redis-server" in started.stderr:
            if os.environ.get("CI") == "true":
                pytest.fail(started.stderr)
            pytest.skip("redis-server is not installed")
        assert started.returncode == 0, started.stderr
        exports = dict(re.findall(r"^export (\w+)=(\S+)$", started.stdout, re.MULTILINE))
        assert set(exports) == {
            "RAY_ADDRESS",
            "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER",
            "RAY_AUTH_MODE",
            "RAY_AUTH_TOKEN_PATH",
            "GROVE_STORE",
        }, started.stdout
        pids = {name: int((state / f"{name}.pid").read_text()) for name in ("redis", "ray-nodes")}
        yield LocalCluster(state, exports, {**clean_environment(base), **exports}, pids)
    finally:
        run_script("stop", "--state-dir", str(state), timeout_s=STOP_TIMEOUT_S)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with local_cluster(tmp_path_factory.mktemp("local-cluster")) as started:
        yield started


def tasks_file(path: Path, tasks: list[dict[str, Any]]) -> Path:
    """`path`, holding `tasks` one JSON object a line (as `grove batch` reads them)."""
    path.write_text("".join(json.dumps(task) + "\n" for task in tasks))
    return path


def process_groups() -> dict[int, list[int]]:
    """Every process group on this machine and its members' pids."""
    groups: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            pgid = int(stat.rsplit(")", 1)[1].split()[2])
            groups.setdefault(pgid, []).append(int(entry.name))
    return groups


def listening_addresses(pids: list[int]) -> list[str]:
    """The local addresses of the TCP sockets these processes listen on."""
    inodes: set[str] = set()
    for pid in pids:
        try:
            links = [os.readlink(fd) for fd in Path(f"/proc/{pid}/fd").iterdir()]
        except OSError:
            continue
        inodes |= {link[8:-1] for link in links if link.startswith("socket:[")}
    addresses: list[str] = []
    for table, width in (("tcp", 8), ("tcp6", 32)):
        for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                address = fields[1].split(":")[0]
                addresses.append(decode_proc_address(address, width))
    return addresses


def decode_proc_address(hex_address: str, width: int) -> str:
    """/proc/net/tcp writes each 32-bit word of the address in host (little-endian) order."""
    raw = b"".join(bytes.fromhex(hex_address[i : i + 8])[::-1] for i in range(0, width, 8))
    return str(ipaddress.ip_address(raw))


def is_loopback(address: str) -> bool:
    parsed = ipaddress.ip_address(address)
    if isinstance(parsed, ipaddress.IPv6Address) and parsed.ipv4_mapped is not None:
        return parsed.ipv4_mapped.is_loopback
    return parsed.is_loopback


def test_two_live_ray_nodes_and_redis_on_loopback_only(cluster: LocalCluster) -> None:
    nodes = cluster.nodes()
    assert len(nodes) == 2 and all(node["alive"] for node in nodes)
    assert {node["address"] for node in nodes} == {"127.0.0.1"}
    kinds = [{r for r in node["resources"] if r.startswith("grove_local_")} for node in nodes]
    assert sorted(map(sorted, kinds)) == [["grove_local_head"], ["grove_local_worker"]]
    groups = process_groups()
    members = [pid for leader in cluster.pids.values() for pid in groups.get(leader, [])]
    addresses = listening_addresses(members)
    assert len(addresses) >= 4, addresses  # Redis, the GCS and at least a raylet per node
    assert all(is_loopback(address) for address in addresses), addresses


WHERE_TOOL = """
import ray


def where() -> str:
    \"\"\"The Ray node this call runs on.\"\"\"
    return ray.get_runtime_context().get_node_id()
"""
WHERE_TASKS = [
    {"id": f"where-{n}", "prompt": "[[sim tool=where args='{}' step=1]] where are you?"}
    for n in range(12)
]


@dataclass(frozen=True)
class Batch:
    result: subprocess.CompletedProcess[str]
    records: list[dict[str, Any]]


@pytest.fixture(scope="module")
def joined(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Batch:
    """One `grove batch` joining the cluster (one start for two tests): TASKS, and
    WHERE_TASKS calling a tool whose module exists only in the driver's directory."""
    base = tmp_path_factory.mktemp("joined")
    (base / "where_tool.py").write_text(WHERE_TOOL)
    tasks = tasks_file(base / "tasks.jsonl", TASKS + WHERE_TASKS)
    output = base / "out.jsonl"
    result = subprocess.run(
        [sys.executable, "-m", "grove.cli.app", "batch", str(tasks), "--simulate", "--model",
         "claude-sonnet-5-5", "--hosts", "2", "--tools", "where_tool:where",
         "--output", str(output)],
        capture_output=True, text=True, env={**cluster.env, "PYTHONPATH": str(REPO_ROOT)},
        cwd=base, timeout=BATCH_TIMEOUT_S, check=False,
    )  # fmt: skip
    records = [json.loads(line) for line in output.read_text().splitlines()]
    return Batch(result, records)


def test_grove_batch_joins_the_cluster_and_stores_in_redis(
    cluster: LocalCluster, joined: Batch
) -> None:
    assert joined.result.returncode == 0, joined.result.stderr
    records = joined.records
    assert sorted(map(str, (record["id"] for record in records))) == sorted(
        str(task["id"]) for task in TASKS + WHERE_TASKS
    )
    assert all(record["status"] == "ok" and record["text"] for record in records)

    # The store is the cluster's Redis: another process reads the same agents there.
    listing = cluster.grove("agents")
    assert listing.returncode == 0, listing.stderr
    for record in records:
        assert record["agent"] in listing.stdout
    store = open_store(cluster.exports["GROVE_STORE"])
    try:
        for record in records:
            agent = store.get_agent(record["agent"])
            assert agent is not None and agent.parent_uuid is not None
    finally:
        store.close()

    # The hosts ran in the cluster's own worker processes, not in a Ray started on the side.
    ray_temp = Path((cluster.state / "ray-tmp").read_text().strip())
    logs = [path.read_bytes() for path in ray_temp.glob("*/session_*/logs/worker-*.out")]
    assert any(b"AgentHost" in log for log in logs)


def test_a_tool_from_a_local_file_runs_on_both_nodes(cluster: LocalCluster, joined: Batch) -> None:
    # The module exists only in the driver's directory; Grove ships the function's code.
    assert joined.result.returncode == 0, joined.result.stderr
    wheres = {task["id"] for task in WHERE_TASKS}
    records = [record for record in joined.records if record["id"] in wheres]
    assert len(records) == len(WHERE_TASKS)
    store = open_store(cluster.exports["GROVE_STORE"])
    try:
        nodes = {
            part["content"]
            for record in records
            for message in store.agent_messages(record["agent"])
            if message.kind == "tool_result"
            for part in message.data["parts"]
            if not part["is_error"]
        }
    finally:
        store.close()
    assert len(nodes) == 2, nodes  # the tool ran on the head node and on the worker node


def test_batch_tasks_in_worktrees_on_both_nodes(cluster: LocalCluster, tmp_path: Path) -> None:
    # On one machine both nodes share the file system, as a cluster whose repository is on
    # a shared path does: every task works and commits in a worktree of its own.
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "where_tool.py").write_text(WHERE_TOOL)
    for command in (["init", "-q"], ["add", "."], ["-c", "user.name=t", "-c",
                    "user.email=t@example.com", "commit", "-qm", "first"]):  # fmt: skip
        subprocess.run(["git", "-C", str(repo), *command], check=True)
    rows = []
    for n in range(12):
        calls = [{"name": "where"}, {"name": "bash", "args": {"command": f"echo {n} > n.txt"}}]
        rows.append({"id": n, "prompt": f"[[sim calls='{json.dumps(calls)}' step=1]] task {n}"})
    tasks = tasks_file(tmp_path / "tasks.jsonl", rows)
    output = tmp_path / "out.jsonl"
    result = subprocess.run(
        [sys.executable, "-m", "grove.cli.app", "batch", str(tasks), "--simulate", "--model",
         "claude-sonnet-5-5", "--hosts", "2", "--worktrees", "--tools", "where_tool:where",
         "--tools", "bash", "--allow", "bash", "--output", str(output)],
        capture_output=True, text=True, env={**cluster.env, "PYTHONPATH": str(REPO_ROOT)},
        cwd=repo, timeout=BATCH_TIMEOUT_S, check=False,
    )  # fmt: skip
    records = [json.loads(line) for line in output.read_text().splitlines()]
    failed = [record for record in records if record["status"] != "ok"]
    assert result.returncode == 0, (result.stdout, result.stderr, failed)
    assert sorted(record["id"] for record in records) == list(range(12))
    for record in records:
        assert record["branch"] == f"grove/{record['agent'][:8]}", record
        assert record["diff_stat"] == "1 file changed, 1 insertion(+)"
        shown = subprocess.run(
            ["git", "-C", str(repo), "show", f"{record['branch']}:n.txt"],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        assert shown.stdout == f"{record['id']}\n"
    nodes = {exchange["content"] for record in records for exchange in record["tool_results"]
             if exchange["name"] == "where"}  # fmt: skip
    assert len(nodes) == 2, nodes  # tasks ran, in their worktrees, on both nodes


RACERS = 30


def test_a_strict_budget_holds_for_agents_racing_on_both_nodes(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    limit = 15 * RACERS  # about half the racing tasks fit (32 of 60 in a run), as at any size
    racing = [{"id": n, "prompt": f"[[sim tokens=60]] race {n}"} for n in range(RACERS)]
    tasks = tasks_file(tmp_path / "tasks.jsonl", racing)
    output = tmp_path / "out.jsonl"
    result = subprocess.run(
        [sys.executable, "-m", "grove.cli.app", "batch", str(tasks), "--simulate", "--model",
         "claude-sonnet-5-5", "--hosts", "2", "--concurrency", str(RACERS), "--budget-tokens",
         str(limit), "--output", str(output)],
        capture_output=True, text=True, cwd=REPO_ROOT, timeout=BATCH_TIMEOUT_S, check=False,
        env={**cluster.env, "GROVE_BUDGET__RESERVE_OUTPUT": "20", "GROVE_BUDGET__STRICT": "true"},
    )  # fmt: skip
    assert result.returncode == 1, result.stderr  # the budget ran out: the rest is skipped
    records = [json.loads(line) for line in output.read_text().splitlines()]
    assert {"ok", "skipped"} <= {record["status"] for record in records}
    store = open_store(cluster.exports["GROVE_STORE"])
    try:
        agents = [store.get_agent(r["agent"]) for r in records if r.get("agent")]
        root = store.get_agent(agents[0].parent_uuid)  # type: ignore[union-attr, arg-type]
        assert root is not None
        spent = usage_report(store, subtree(store, root)).total
    finally:
        store.close()
    # Every reply was capped at the 20 tokens its request held: agents all at once on two
    # nodes, one budget held in the supervisor, and what they settled stays within it.
    assert 0 < spent.input_tokens + spent.output_tokens <= limit


SLOW_TASKS = [
    {"id": f"slow-{n}", "prompt": f"[[sim tokens=30 tps=15]] slow task {n}"} for n in range(24)
]
WAVE = 8  # tasks in flight at once


def log_sizes(cluster: LocalCluster) -> dict[Path, int]:
    """The size of each Ray worker log of the cluster now."""
    ray_temp = Path((cluster.state / "ray-tmp").read_text().strip())
    return {path: path.stat().st_size for path in ray_temp.glob("*/session_*/logs/worker-*.out")}


def nodes_hosting_agents(cluster: LocalCluster, before: dict[Path, int]) -> set[str]:
    """The local nodes ('head', 'worker') whose Ray workers have started an AgentHost actor
    since the logs had the sizes `before`."""
    ray_temp = Path((cluster.state / "ray-tmp").read_text().strip())
    return {
        path.relative_to(ray_temp).parts[0]
        for path in log_sizes(cluster)
        if b":actor_name:AgentHost" in path.read_bytes()[before.get(path, 0) :]
    }


def output_lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_a_batch_across_both_nodes_finishes_when_the_worker_node_goes_halfway(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    # After the tests that need both nodes: `stop-worker` removes the worker node for good.
    tasks = tasks_file(tmp_path / "slow.jsonl", SLOW_TASKS)
    output = tmp_path / "slow.out.jsonl"
    command = [
        sys.executable, "-m", "grove.cli.app", "batch", str(tasks), "--simulate",
        "--model", "claude-sonnet-5-5", "--hosts", "2", "--concurrency", str(WAVE),
        "--output", str(output),
    ]  # fmt: skip
    logs = log_sizes(cluster)
    store = open_store(cluster.exports["GROVE_STORE"])
    try:
        events_before = store.last_event_id()
    finally:
        store.close()
    with (tmp_path / "batch.err").open("w") as errors:
        batch = subprocess.Popen(
            command, env=cluster.env, cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=errors
        )
        try:
            deadline = time.monotonic() + BATCH_TIMEOUT_S
            while output_lines(output) < WAVE and batch.poll() is None:
                assert time.monotonic() < deadline, "the first tasks never finished"
                time.sleep(0.05)
            assert batch.poll() is None, "the batch ended before the worker node went"
            assert nodes_hosting_agents(cluster, logs) == {"head", "worker"}
            done_before = output_lines(output)
            removed = cluster.script("stop-worker")
            assert removed.returncode == 0, removed.stderr
            returncode = batch.wait(timeout=BATCH_TIMEOUT_S)
        finally:
            if batch.poll() is None:
                batch.terminate()
                batch.wait(timeout=STOP_TIMEOUT_S)
    assert returncode == 0, (tmp_path / "batch.err").read_text()
    assert done_before < len(SLOW_TASKS)
    records = [json.loads(line) for line in output.read_text().splitlines()]
    # Every task exactly once, each finished: nothing lost, nothing run twice to completion.
    assert sorted(record["id"] for record in records) == sorted(t["id"] for t in SLOW_TASKS)
    assert all(record["status"] == "ok" for record in records), records
    store = open_store(cluster.exports["GROVE_STORE"])
    try:
        kinds = {event.kind for event in store.events(events_before, limit=100_000)}
    finally:
        store.close()
    # Grove noticed: the worker's hosts were replaced, or turns there were interrupted.
    assert kinds & {"HostRestarted", "TurnInterrupted"}, sorted(kinds)
    # `stop-worker` removed only the worker node: the head, Redis and the store stay.
    assert cluster.script("status").stdout.splitlines() == [
        f"redis: running (pid {cluster.pids['redis']})",
        f"ray-nodes: running (pid {cluster.pids['ray-nodes']})",
        "ray worker node: removed",
    ]
    alive = [node for node in cluster.nodes() if node["alive"]]
    assert len(alive) == 1 and "grove_local_head" in alive[0]["resources"]
    assert cluster.grove("agents").returncode == 0


def test_stop_ends_every_process_it_started_and_removes_its_files(cluster: LocalCluster) -> None:
    ray_temp = Path((cluster.state / "ray-tmp").read_text().strip())
    stopped = cluster.script("stop")
    assert stopped.returncode == 0, stopped.stderr
    groups = process_groups()
    for name, leader in cluster.pids.items():
        assert leader not in groups, f"{name}'s processes are still running: {groups[leader]}"
    assert not ray_temp.exists()
    left = sorted(path.name for path in cluster.state.iterdir())
    assert left == ["ray-nodes.log", "redis.log"]
    assert cluster.script("status").stdout.splitlines() == [
        "redis: not running",
        "ray-nodes: not running",
    ]
