"""A Redis store that goes away while turns are running and comes back: the supervisor's store
calls wait for it, every turn finishes, each answer is stored once, and the usage the store
records is what the simulator billed (nothing counted twice)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import redis

from grove.providers.http import Endpoint
from grove.simulator import SimulatorConfig, SimulatorThread
from grove.supervisor.store import open_store
from grove.supervisor.usage import usage_report
from tests.conftest import _answers_ping, free_loopback_port, required_binary, stop_process
from tests.integration.groves import running_grove

KEY = "sim-outage-key-2b9e"
OUTAGE_S = 2.0


class DurableRedis:
    """A redis-server on `port` that writes every change to its append-only file in
    `workdir`, so one started again there has the same data; stopped through its handle."""

    def __init__(self, workdir: Path, port: int) -> None:
        self.workdir, self.port = workdir, port
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        executable = required_binary("redis-server")
        with (self.workdir / "redis.log").open("ab") as log:
            self.process = subprocess.Popen(
                [executable, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                 "--appendonly", "yes", "--appendfsync", "always", "--dir", str(self.workdir)],
                stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
        client = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=1.0)
        assert _answers_ping(self.process, client), (self.workdir / "redis.log").read_text()

    def stop(self) -> None:
        if self.process is not None:
            stop_process(self.process)
            self.process = None


def test_turns_wait_for_a_redis_that_goes_away_and_nothing_is_counted_twice(
    tmp_path: Path,
) -> None:
    server = DurableRedis(tmp_path, free_loopback_port())
    url = f"redis://127.0.0.1:{server.port}/0"
    config = SimulatorConfig(api_key=KEY, ttft_ms=1500, tokens=5)
    server.start()
    try:
        with (
            SimulatorThread(config) as simulator,
            running_grove(
                tmp_path,
                store_url=url,
                endpoint=Endpoint(base_url=simulator.base_url, api_key=KEY),
            ) as grove,
        ):
            root = grove.create_root("claude-haiku-4-5").uuid
            children = grove.fork_many(root, [f"task {n}" for n in range(30)])
            server.stop()  # while every reply is still on its way
            time.sleep(OUTAGE_S)
            server.start()
            results = grove.wait_any(children, 120)
            while len(results) < len(children):
                results |= grove.wait_any([c for c in children if c not in results], 120)
            assert all(r is not None and r.ok for r in results.values()), results
            store = open_store(url)
            try:
                answers = [
                    sum(m.kind == "assistant" for m in store.agent_messages(child))
                    for child in children
                ]
                agents = [a for a in store.list_agents() if a.uuid in children]
                recorded = usage_report(store, agents).total
            finally:
                store.close()
            billed = simulator.simulator.billed
    finally:
        server.stop()
    assert answers == [1] * len(children)
    assert (recorded.requests, recorded.input_tokens, recorded.output_tokens) == (
        billed["requests"],
        billed["input_tokens"],
        billed["output_tokens"],
    )
