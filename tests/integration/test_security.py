"""Secrets end to end: a canary key absent from the store, the event log, outputs, every process's
output and Ray's session logs after batches with faults; the credentials.json permission
warning; Redis store URLs with a password and with TLS. Real Ray, Redis and simulator processes.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import redis

from grove.supervisor.store import AgentRecord, open_store
from tests.conftest import required_binary

RUN_TIMEOUT_S = 240
START_TIMEOUT_S = 30.0
CANARY = f"sk-canary-{secrets.token_hex(12)}"
WRONG_KEY = f"sk-wrong-{secrets.token_hex(12)}"
FRAGMENT = 10  # no run of this many characters of a key's random part may show up anywhere
THROWAWAY_KEY = re.compile(rb"sim-[0-9a-f]{32}")  # the key `--simulate` makes for itself
PERMISSION_WARNING = "could be read by other users (mode 644); it is now 0600"
ADVICE = {"note": "log lines must never carry request headers", "severity": "concern"}
TASKS: list[dict[str, Any]] = [
    {"id": "plain", "prompt": "review the logging module"},
    {"id": "throttled", "prompt": "[[sim fault=429 retry_after=0 times=1]] throttled once"},
    {"id": "early-error", "prompt": "[[sim fault=error_after_200 times=1]] fails, then works"},
    {"id": "broken", "prompt": "[[sim fault=disconnect after=1]] breaks mid-stream"},
    {
        "id": "reviewed",
        "prompt": f"[[sim@reviewer tool=advise args='{json.dumps(ADVICE)}']] add request logs",
    },
    {"id": "openai", "prompt": "review on the OpenAI wire", "model": "gpt-6.1-terra"},
    {"id": "google", "prompt": "review on the Gemini wire", "model": "gemini-3.8-flash"},
]


def fragments(key: str) -> set[bytes]:
    """The key itself and every FRAGMENT-character run of its random part (a masked or
    truncated key still leaks)."""
    random_part = key.rsplit("-", 1)[1]
    runs = {random_part[i : i + FRAGMENT] for i in range(len(random_part) - FRAGMENT + 1)}
    return {key.encode(), *(run.encode() for run in runs)}


def leaks(sources: dict[str, bytes], key: str) -> list[str]:
    """The names of the sources that hold any fragment of `key`."""
    pieces = fragments(key)
    return [name for name, data in sources.items() if any(piece in data for piece in pieces)]


def files_under(directory: Path) -> dict[str, bytes]:
    """Every regular file below `directory` (sockets and links skipped), by path."""
    return {
        str(path): path.read_bytes()
        for path in sorted(directory.rglob("*"))
        if path.is_file() and not path.is_symlink()
    }


def clean_env(base: Path, ray_tmp: Path) -> dict[str, str]:
    """The test runner's environment without Grove, Ray, key or base-URL settings, plus a
    private store, config, XDG dirs and Ray temp dir (so its session logs are this test's)."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("GROVE_", "RAY_")) and not key.endswith(("_API_KEY", "_BASE_URL"))
    }
    env.update(
        GROVE_STORE=f"sqlite:///{base / 'grove.sqlite3'}",
        GROVE_CONFIG_FILE=str(base / "config.toml"),
        XDG_CONFIG_HOME=str(base / "config"),
        XDG_DATA_HOME=str(base / "data"),
        RAY_TMPDIR=str(ray_tmp),
        GROVE_NO_SERVICE="1",  # in-process: no service left behind (tests/conftest.py)
    )
    return env


@dataclass
class Evidence:
    """Everything a run left behind, by name, and the parsed outputs the tests check."""

    base: Path
    ray_tmp: Path
    outputs: dict[str, bytes] = field(default_factory=dict)  # stdout/stderr of each process
    codes: dict[str, int] = field(default_factory=dict)
    records: dict[str, dict[Any, dict[str, Any]]] = field(default_factory=dict)

    def grove(self, name: str, env: dict[str, str], *args: str) -> None:
        done = subprocess.run(
            [sys.executable, "-m", "grove.cli.app", *args],
            capture_output=True,
            env=env,
            timeout=RUN_TIMEOUT_S,
            check=False,
        )
        self.outputs[f"{name} stdout"] = done.stdout
        self.outputs[f"{name} stderr"] = done.stderr
        self.codes[name] = done.returncode

    def stderr(self, name: str) -> str:
        return self.outputs[f"{name} stderr"].decode()

    def sources(self) -> dict[str, bytes]:
        """What must never hold a key: the store's files, every output, Ray's logs."""
        found = dict(self.outputs)
        found.update(files_under(self.ray_tmp))
        found.update({str(p): p.read_bytes() for p in self.base.glob("grove.sqlite3*")})
        found.update({str(p): p.read_bytes() for p in self.base.glob("*.out.jsonl")})
        found.update({str(p): p.read_bytes() for p in self.base.glob("simulator.*")})
        return found


class Simulator:
    """`grove simulate` as its own process, accepting one key; stopped through its handle."""

    def __init__(self, base: Path, env: dict[str, str], key: str) -> None:
        self.stdout = base / "simulator.stdout"
        self.stderr = base / "simulator.stderr"
        with self.stdout.open("wb") as out, self.stderr.open("wb") as err:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "grove.cli.app",
                    "simulate",
                    "--port",
                    "0",
                    "--api-key",
                    key,
                ],
                stdout=out,
                stderr=err,
                env=env,
            )
        self.url = self._wait_for_url()

    def _wait_for_url(self) -> str:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline and self.process.poll() is None:
            first = self.stdout.read_text().partition("\n")[0]
            if first.startswith("listening on http://"):
                return first.removeprefix("listening on ")
            time.sleep(0.05)
        self.stop()
        pytest.fail(f"the simulator did not start: {self.stderr.read_text()[-2000:]}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def write_credentials(path: Path, keys: dict[str, str], mode: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({provider: {"api_key": key} for provider, key in keys.items()}))
    path.chmod(mode)


def read_records(path: Path) -> dict[Any, dict[str, Any]]:
    return {record["id"]: record for record in map(json.loads, path.read_text().splitlines())}


@pytest.fixture(scope="module")
def evidence(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Evidence]:
    """One batch over the real credential path against a simulator process that accepts only
    the canary (OpenAI's key, from credentials.json, is wrong); `grove run` with the key in a
    credentials.json others can read; one `--simulate` batch with the canary planted but
    unused; then `grove events`, `agents` and `history` over the same store."""
    base = tmp_path_factory.mktemp("security")
    ray_tmp = Path(tempfile.mkdtemp(prefix="gs-"))  # short: Ray's socket paths live below it
    found = Evidence(base=base, ray_tmp=ray_tmp)
    env = clean_env(base, ray_tmp)
    # The early error is retried once: in 50 ms at most, not 0.25 to 0.5 s (per batch).
    (base / "config.toml").write_text(
        "[providers.retry]\nbase_delay_s = 0.01\nmax_delay_s = 0.05\n"
    )
    tasks = base / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(task) + "\n" for task in TASKS))
    credentials = base / "config" / "grove" / "credentials.json"
    batch = ["batch", str(tasks), "--model", "claude-sonnet-5-5/low", "--concurrency", "4"]
    batch += ["--advisor", "claude-haiku-4-5", "--hosts", "2"]
    try:
        simulator = Simulator(base, env, CANARY)
        try:
            urls = {
                f"{name}_BASE_URL": simulator.url
                for name in ("ANTHROPIC", "OPENAI", "GOOGLE_GEMINI")
            }
            write_credentials(credentials, {"anthropic": CANARY, "openai": WRONG_KEY}, 0o600)
            real_env = env | urls | {"ANTHROPIC_API_KEY": CANARY, "GOOGLE_API_KEY": CANARY}
            found.grove("real batch", real_env, *batch, "--output", str(base / "real.out.jsonl"))
            credentials.chmod(0o644)
            found.grove("run", env | urls, "run", "--model", "claude-haiku-4-5", "say hello")
            credentials.chmod(0o600)
        finally:
            simulator.stop()
        planted = env | {f"{name}_API_KEY": CANARY for name in ("ANTHROPIC", "OPENAI", "GOOGLE")}
        simulated_out = str(base / "simulated.out.jsonl")
        found.grove("simulated batch", planted, *batch, "--simulate", "--output", simulated_out)
        found.records = {
            "real": read_records(base / "real.out.jsonl"),
            "simulated": read_records(base / "simulated.out.jsonl"),
        }
        found.grove("events", env, "events")
        found.grove("agents", env, "agents", "--all")
        for run in ("real", "simulated"):
            for task_id in ("broken", "openai", "reviewed"):
                agent = found.records[run][task_id]["agent"]
                found.grove(f"history {run} {task_id}", env, "history", agent)
        yield found
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)


# ----- the batches did what they were asked ----------------------------------------------------


@pytest.mark.parametrize("run", ["real", "simulated"])
def test_faults_were_met_and_the_advisor_ran(evidence: Evidence, run: str) -> None:
    assert evidence.codes[f"{run} batch"] == 1, evidence.stderr(f"{run} batch")
    assert "Traceback" not in evidence.stderr(f"{run} batch")
    records = evidence.records[run]
    assert set(records) == {task["id"] for task in TASKS}
    failed = {"broken", "openai"} if run == "real" else {"broken"}
    assert {task_id for task_id, r in records.items() if r["status"] == "error"} == failed
    assert "stream broke after content arrived" in records["broken"]["error"]
    assert records["reviewed"]["advice"] == [{"reviewer": "advisor", **ADVICE}]


def test_a_wrong_key_names_the_problem_but_not_the_key(evidence: Evidence) -> None:
    error = evidence.records["real"]["openai"]["error"]
    assert "401" in error and "key" in error.lower(), error
    assert WRONG_KEY not in error


def test_the_canary_reached_the_simulator_through_the_real_credential_path(
    evidence: Evidence,
) -> None:
    """The simulator accepts only the canary: every answer proves the key went where it must."""
    records = evidence.records["real"]
    assert all(records[t]["status"] == "ok" for t in ("plain", "throttled", "google"))
    assert evidence.codes["run"] == 0, evidence.stderr("run")  # its key came from the file
    assert evidence.outputs["run stdout"].strip()


# ----- no key anywhere ---------------------------------------------------------------------------


def test_the_search_is_not_vacuous(evidence: Evidence) -> None:
    """The scan reads Ray's worker logs, the store and the exception texts in the event log;
    and it does find a key where one is (credentials.json)."""
    sources = evidence.sources()
    worker_logs = [name for name in sources if "/logs/worker-" in name]
    assert len(worker_logs) >= 4, sorted(sources)
    assert any(name.endswith("grove.sqlite3") for name in sources)
    events = evidence.outputs["events stdout"].decode()
    assert "stream broke after content arrived" in events and "401" in events
    credentials = evidence.base / "config" / "grove" / "credentials.json"
    assert leaks({"credentials.json": credentials.read_bytes()}, CANARY) == ["credentials.json"]


@pytest.mark.parametrize("key", [CANARY, WRONG_KEY], ids=["canary", "wrong-key"])
def test_no_key_in_the_store_events_logs_outputs_or_errors(evidence: Evidence, key: str) -> None:
    assert leaks(evidence.sources(), key) == []


def test_the_simulate_key_stays_in_memory_too(evidence: Evidence) -> None:
    found = [name for name, data in evidence.sources().items() if THROWAWAY_KEY.search(data)]
    assert found == []


# ----- credentials.json permissions ----------------------------------------------------------


def test_a_credentials_file_others_can_read_is_warned_about(evidence: Evidence) -> None:
    path = evidence.base / "config" / "grove" / "credentials.json"
    warning = f"Warning: {path} {PERMISSION_WARNING}"
    assert evidence.stderr("run").splitlines().count(warning) == 1, evidence.stderr("run")
    for quiet in ("real batch", "simulated batch", "events", "agents"):
        assert "read by other users" not in evidence.stderr(quiet)


# ----- Redis URLs ----------------------------------------------------------------------------

REDIS_PASSWORD = f"pw-{secrets.token_hex(8)}"
WRONG_REDIS_PASSWORD = f"wrong-{secrets.token_hex(8)}"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def locked_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """A redis-server of this module's own on a free port, requiring REDIS_PASSWORD."""
    executable = required_binary("redis-server")
    workdir = tmp_path_factory.mktemp("locked-redis")
    port = _free_port()
    with (workdir / "redis.log").open("wb") as log:
        process = subprocess.Popen(
            [executable, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(workdir), "--requirepass", REDIS_PASSWORD],
            stdout=log,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        client = redis.Redis(host="127.0.0.1", port=port, password=REDIS_PASSWORD)
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline or process.poll() is not None:
                    pytest.fail((workdir / "redis.log").read_text()[-2000:])
                time.sleep(0.05)
        client.close()
        yield port
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def grove_agents(store_url: str, tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], float]:
    env = clean_env(tmp_path, tmp_path / "ray")
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "grove.cli.app", "--store", store_url, "agents"],
        capture_output=True,
        text=True,
        env=env,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    return done, time.monotonic() - started


def test_a_wrong_redis_password_is_one_clear_error(locked_redis: int, tmp_path: Path) -> None:
    done, _ = grove_agents(f"redis://:{WRONG_REDIS_PASSWORD}@127.0.0.1:{locked_redis}/0", tmp_path)
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr == (
        f"Redis at redis://127.0.0.1:{locked_redis} refused the credentials of the store URL "
        "(wrong user name or password)\n"
    )
    assert WRONG_REDIS_PASSWORD not in done.stderr + done.stdout


def test_the_right_redis_password_lists_the_agents(locked_redis: int, tmp_path: Path) -> None:
    url = f"redis://:{REDIS_PASSWORD}@127.0.0.1:{locked_redis}/0?namespace=sec-{tmp_path.name}"
    store = open_store(url)
    root = AgentRecord(uuid="abcd1234", role="root", created_at=time.time())
    store.create_agents([root])
    store.close()
    done, _ = grove_agents(url, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "abcd1234  root  stopped  no model  0 messages\n"
    assert REDIS_PASSWORD not in done.stderr + done.stdout


def test_a_tls_url_against_a_plain_server_fails_clearly_and_soon(
    locked_redis: int, tmp_path: Path
) -> None:
    # A plain server never answers the TLS handshake: the store's socket timeout ends the wait.
    url = f"rediss://:{REDIS_PASSWORD}@127.0.0.1:{locked_redis}/0?socket_timeout=1"
    done, took = grove_agents(url, tmp_path)
    assert done.returncode == 1
    assert took < 30.0
    assert done.stderr.startswith(f"Cannot reach Redis at rediss://127.0.0.1:{locked_redis}")
    assert len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr
    assert REDIS_PASSWORD not in done.stderr + done.stdout
