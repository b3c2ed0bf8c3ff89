"""What Grove's benchmarks share: the simulator in a process of its own, a private
redis-server, a Grove pointed at an external endpoint, and RSS read from /proc.

No benchmark logic lives here; each bench/*.py measures one thing and prints one JSON line.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
SIMULATOR_START_TIMEOUT_S = 30.0
CLUSTER_START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 10.0
REDIS_START_TIMEOUT_S = 10.0
PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
MODEL = "claude-sonnet-5-5"


@dataclass(frozen=True, kw_only=True, slots=True)
class Pacing:
    """How the simulator answers: time to first token, tokens per second, reply length."""

    ttft_ms: int
    tps: float
    tokens: int

    @property
    def seconds(self) -> float:
        """The simulated latency of one reply, first byte to last token."""
        return self.ttft_ms / 1000 + (self.tokens / self.tps if self.tps else 0.0)

    def as_dict(self) -> dict[str, float]:
        return {"ttft_ms": self.ttft_ms, "tps": self.tps, "tokens": self.tokens}

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        """--ttft-ms, --tps and --tokens, the fan-out benchmarks' pace by default."""
        parser.add_argument("--ttft-ms", type=int, default=500)
        parser.add_argument("--tps", type=float, default=50.0)
        parser.add_argument("--tokens", type=int, default=40)

    @classmethod
    def of(cls, args: argparse.Namespace) -> Pacing:
        return cls(ttft_ms=args.ttft_ms, tps=args.tps, tokens=args.tokens)


@dataclass(frozen=True, kw_only=True, slots=True)
class ExternalSimulator:
    base_url: str
    api_key: str = field(repr=False)
    pid: int


@contextmanager
def simulator_process(
    pacing: Pacing,
    context_window: int | None = None,
    rpm: int | None = None,
    prefill_tps: float | None = None,
    batch_delay_s: float | None = None,
) -> Iterator[ExternalSimulator]:
    """`grove simulate` in a process of its own on a free port, stopped through its handle;
    `context_window` overrides every model's window there, `rpm` limits its requests,
    `prefill_tps` makes the time to first token grow with the prompt not read from a cache,
    `batch_delay_s` is how long a provider batch takes to end."""
    key = "bench-" + secrets.token_hex(12)
    command = [
        sys.executable, "-m", "grove.cli.app", "simulate", "--port", "0",
        "--ttft-ms", str(pacing.ttft_ms), "--tps", str(pacing.tps),
        "--tokens", str(pacing.tokens),
    ]  # fmt: skip
    if context_window is not None:
        command += ["--context-window", str(context_window)]
    if rpm is not None:
        command += ["--rpm", str(rpm)]
    if prefill_tps is not None:
        command += ["--prefill-tps", str(prefill_tps)]
    if batch_delay_s is not None:
        command += ["--batch-delay-s", str(batch_delay_s)]
    process = subprocess.Popen(
        command,
        cwd=REPO_ROOT,
        env={**os.environ, "GROVE_SIM_API_KEY": key},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        url = _announced(process, "the simulator", "listening on ", SIMULATOR_START_TIMEOUT_S)
        yield ExternalSimulator(base_url=url, api_key=key, pid=process.pid)
    finally:
        _stop(process, interrupt=True)


def _announced(process: subprocess.Popen[str], what: str, prefix: str, timeout_s: float) -> str:
    """The rest of the first output line that starts with `prefix` (read with a deadline)."""
    found: list[str] = []

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith(prefix):
                found.append(line.removeprefix(prefix).strip())
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout_s)
    if not found:
        raise SystemExit(f"{what} did not start within {timeout_s:g} s")
    return found[0]


def _stop(process: subprocess.Popen[Any], *, interrupt: bool = False) -> None:
    """Interrupt (or terminate), wait, then kill: only this one process."""
    if process.poll() is None:
        if interrupt:
            process.send_signal(2)
        else:
            process.terminate()
        try:
            process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def ray_cluster(node_env: dict[str, str]) -> Iterator[dict[str, str]]:
    """A running two-node Ray cluster on loopback with token authentication (what
    `deploy/local/cluster.sh` starts), its nodes holding `node_env` (provider keys live on
    the nodes), stopped through its handle. Yields the environment a process needs to join
    it: RAY_ADDRESS and the token settings."""
    with tempfile.TemporaryDirectory(prefix="grove-bench-ray-") as workdir:
        token_path = Path(workdir) / "ray-auth-token"
        token_path.write_text(secrets.token_hex(32))
        token_path.chmod(0o600)
        joining = {
            "RAY_AUTH_MODE": "token",
            "RAY_AUTH_TOKEN_PATH": str(token_path),
            "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",  # keep 127.0.0.1 in RAY_ADDRESS
        }
        process = subprocess.Popen(
            [sys.executable, str(REPO_ROOT / "deploy" / "local" / "ray_nodes.py"),
             "--temp-dir", workdir],
            cwd=REPO_ROOT,
            env={**os.environ, **node_env, **joining, "RAY_USAGE_STATS_ENABLED": "0"},
            stdout=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        try:
            address = _announced(process, "the Ray cluster", "ready ", CLUSTER_START_TIMEOUT_S)
            yield {**joining, "RAY_ADDRESS": address}
        finally:
            _stop(process)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def redis_server() -> Iterator[str]:
    """A private redis-server on a free loopback port (never 6379), no persistence."""
    import redis

    executable = shutil.which("redis-server")
    if executable is None:
        raise SystemExit("redis-server is not on PATH")
    with tempfile.TemporaryDirectory(prefix="grove-bench-redis-") as workdir:
        port = free_port()
        process = subprocess.Popen(
            [
                executable, "--port", str(port), "--bind", "127.0.0.1",
                "--save", "", "--appendonly", "no", "--dir", workdir,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + REDIS_START_TIMEOUT_S
            client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=1.0)
            while True:
                try:
                    if client.ping():
                        break
                except redis.ConnectionError:
                    if time.monotonic() > deadline or process.poll() is not None:
                        raise SystemExit("redis-server did not start") from None
                    time.sleep(0.05)
            client.close()
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            _stop(process)


@contextmanager
def quiet_config() -> Iterator[None]:
    """No user config file is read: the benchmark's settings are its own."""
    with tempfile.TemporaryDirectory(prefix="grove-bench-config-") as directory:
        previous = os.environ.get("GROVE_CONFIG_FILE")
        os.environ["GROVE_CONFIG_FILE"] = str(Path(directory) / "none.toml")
        try:
            yield
        finally:
            if previous is None:
                os.environ.pop("GROVE_CONFIG_FILE", None)
            else:
                os.environ["GROVE_CONFIG_FILE"] = previous


@contextmanager
def running_grove(
    simulator: ExternalSimulator,
    *,
    store_url: str | None = None,
    hosts: int | None = None,
    idle_release_s: float | None = None,
    idle_pools: int | None = None,
    sections: dict[str, Any] | None = None,
) -> Iterator[Any]:
    """A Grove on a fresh store (a temp SQLite file unless `store_url`) whose providers all
    reach the external simulator; `sections` as a config file's tables would give them
    (`{"mcp": {"servers": ...}}`, `{"compaction": {...}}`)."""
    from grove.providers.http import Endpoint
    from grove.supervisor import Grove
    from grove.supervisor.config import load_settings

    with tempfile.TemporaryDirectory(prefix="grove-bench-") as directory, quiet_config():
        url = store_url or f"sqlite:///{Path(directory) / 'grove.sqlite3'}"
        flags: dict[str, Any] = {"store": url}
        host_options = {"idle_release_s": idle_release_s, "idle_pools": idle_pools}
        if given := {name: value for name, value in host_options.items() if value is not None}:
            flags["hosts"] = given
        flags.update(sections or {})
        settings = load_settings(**flags)
        endpoint = Endpoint(base_url=simulator.base_url, api_key=simulator.api_key)
        with Grove(settings=settings, endpoint=endpoint, hosts=hosts) as grove:
            yield grove


def grove_pids(grove: Any, solo_agents: Iterable[str] = ()) -> list[int]:
    """This driver, the supervisor, the shared hosts, and the own host process of each of
    `solo_agents` (agents with `isolation="process"`, already placed)."""
    import ray

    ready = ray.get(grove.supervisor.ready.remote(), timeout=60)
    solo = {int(grove.provider_identity(uuid)["pid"]) for uuid in solo_agents}
    return [os.getpid(), int(ready["pid"]), *(int(h["pid"]) for h in ready["hosts"]), *solo]


def cpu_s(pids: Iterable[int]) -> float:
    """The CPU time (user and system) the processes have used so far: unlike the wall time,
    not stretched by what else runs on a shared machine."""
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / CLOCK_TICKS


def rss_kb(pid: int) -> int:
    """Resident set size of one process (0 when it has gone)."""
    try:
        with open(f"/proc/{pid}/statm") as statm:
            return int(statm.read().split()[1]) * PAGE_KB
    except (FileNotFoundError, ProcessLookupError):
        return 0


def descendants(root: int) -> list[int]:
    """Every live process below `root` (Ray's own: GCS, raylet, workers)."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                ppid = int(stat.read().rsplit(")", 1)[1].split()[1])
        except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
            continue
        parents.setdefault(ppid, []).append(int(entry))
    found: list[int] = []
    stack = [root]
    while stack:
        for child in parents.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


class PeakRSS:
    """Samples the summed RSS of a set of processes in a thread; `peak_mb` is the highest."""

    def __init__(self, pids: list[int], interval_s: float = 0.1) -> None:
        self.pids = list(pids)
        self.peak_kb = 0
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def total_kb(self) -> int:
        return sum(rss_kb(pid) for pid in self.pids)

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak_kb = max(self.peak_kb, self.total_kb())
            self._stop.wait(self._interval_s)

    def __enter__(self) -> PeakRSS:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak_kb = max(self.peak_kb, self.total_kb())

    @property
    def peak_mb(self) -> float:
        return round(self.peak_kb / 1024, 1)


def percentile(samples: list[float], fraction: float) -> float:
    """Nearest-rank percentile of `samples` (fraction in 0..1)."""
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(fraction * len(ordered) + 0.5) - 1))
    return ordered[index]


def simulator_stats(simulator: ExternalSimulator) -> dict[str, Any]:
    """What the simulator has billed and how many requests it refused with 429."""
    import httpx

    stats: dict[str, Any] = httpx.get(simulator.base_url + "/_simulator/stats", timeout=10).json()
    return stats


def pydantic_ai_model(simulator: ExternalSimulator, n: int, timeout_s: float) -> Any:
    """A pydantic-ai AnthropicModel on the simulator, its SDK client given a pool as large as
    the fan-out of `n` (the default limit would queue the requests and measure that, not
    pydantic-ai). Imported here: only benchmarks that compare with it need the bench extra."""
    import httpx2  # the anthropic SDK's own HTTP client
    from anthropic import AsyncAnthropic
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.providers.anthropic import AnthropicProvider

    limits = httpx2.Limits(max_connections=n, max_keepalive_connections=n)
    client = AsyncAnthropic(
        base_url=simulator.base_url,
        api_key=simulator.api_key,
        http_client=httpx2.AsyncClient(limits=limits, timeout=timeout_s),
    )
    return AnthropicModel(MODEL, provider=AnthropicProvider(anthropic_client=client))
