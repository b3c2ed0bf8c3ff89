"""Benchmark: what open streams cost a Grove service (`grove up --simulate`), against the same
service with none open, measured in the same run (the figures test_service_abuse used to
bound in wall-clock and CPU time).

- `healthz`: the median time of `GET /healthz` with 500 event streams open, against none open
  (rounds alternate: streams opened, measured, closed, measured again).
- `idle_tree_streams`: the CPU time the service's process uses over an idle interval with
  300 tree streams open, against the same interval with none (a tree is read again only
  when the event log grows, so idle streams should cost next to nothing).

Reported: the figures and their ratios. Prints one JSON line. Run from the repository root:
`python bench/service_streams.py`.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from harness import REPO_ROOT, cpu_s, free_port

EVENT_STREAMS = 500
TREE_STREAMS = 300
HEALTHZ_CALLS = 50
IDLE_S = 3.0
ROUNDS = 3


@dataclass(frozen=True, slots=True)
class RunningService:
    url: str
    port: int
    token: str
    pid: int


@contextmanager
def grove_up() -> Iterator[RunningService]:
    """`grove up --simulate` with a home of its own, room for the streams, stopped by
    `grove down`."""
    with tempfile.TemporaryDirectory(prefix="grove-bench-streams-") as name:
        home = Path(name)
        config_file = home / "config.toml"
        config_file.write_text(f"[service]\nmax_streams = {EVENT_STREAMS + 100}\n")
        env = {
            **os.environ,
            "XDG_CONFIG_HOME": str(home / "config"),
            "GROVE_CONFIG_FILE": str(config_file),
            "GROVE_STORE": f"sqlite:///{home / 'grove.sqlite3'}",
        }
        grove = [sys.executable, "-m", "grove.cli.entry"]
        port = free_port()
        up = [*grove, "up", "--simulate", "--port", str(port)]
        subprocess.run(up, env=env, cwd=REPO_ROOT, check=True, stdout=subprocess.DEVNULL)
        try:
            state = home / "config" / "grove"
            token = (state / "service-token").read_text().strip()
            pid = int(json.loads((state / "service.json").read_text())["pid"])
            yield RunningService(f"http://127.0.0.1:{port}", port, token, pid)
        finally:
            down = [*grove, "down"]
            subprocess.run(down, env=env, cwd=REPO_ROOT, check=False, stdout=subprocess.DEVNULL)


@contextmanager
def open_streams(service: RunningService, path: str, count: int) -> Iterator[None]:
    """`count` streams of `path` open (each has answered its head) for the block."""
    streams: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.create_connection(("127.0.0.1", service.port), timeout=60)
            streams.append(sock)
            sock.sendall(
                f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{service.port}\r\n"
                f"Authorization: Bearer {service.token}\r\n\r\n".encode()
            )
            head = sock.recv(65536)
            if not head.startswith(b"HTTP/1.1 200"):
                raise SystemExit(f"service streams bench: {path} answered {head[:200]!r}")
        yield
    finally:
        for sock in streams:
            sock.close()


def healthz_s(service: RunningService) -> list[float]:
    took = []
    with httpx.Client(timeout=60) as client:
        for _ in range(HEALTHZ_CALLS):
            started = time.perf_counter()
            client.get(f"{service.url}/healthz").raise_for_status()
            took.append(time.perf_counter() - started)
    return took


def idle_cpu_s(service: RunningService) -> float:
    before = cpu_s([service.pid])
    time.sleep(IDLE_S)
    return cpu_s([service.pid]) - before


def alternating(
    service: RunningService, path: str, count: int, measure: Callable[[RunningService], Any]
) -> tuple[list[Any], list[Any]]:
    """`measure` with `count` streams of `path` open and with none, round after round."""
    loaded: list[Any] = []
    bare: list[Any] = []
    for _ in range(ROUNDS):
        with open_streams(service, path, count):
            time.sleep(1.0)  # each has sent its first rows
            loaded.append(measure(service))
        time.sleep(1.0)  # the service has noticed the closed streams
        bare.append(measure(service))
    return loaded, bare


def main() -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    with grove_up() as service:
        streamed, quiet = alternating(service, "/api/events/stream", EVENT_STREAMS, healthz_s)
        trees, none = alternating(service, "/api/tree/stream", TREE_STREAMS, idle_cpu_s)
    loaded_ms = statistics.median(t for round_ in streamed for t in round_) * 1000
    bare_ms = statistics.median(t for round_ in quiet for t in round_) * 1000
    trees_cpu, none_cpu = statistics.median(trees), statistics.median(none)
    report = {
        "bench": "service_streams",
        "healthz": {
            "streams": EVENT_STREAMS,
            "median_ms": round(loaded_ms, 2),
            "without_streams_ms": round(bare_ms, 2),
            "ratio": round(loaded_ms / bare_ms, 2),
        },
        "idle_tree_streams": {
            "streams": TREE_STREAMS,
            "idle_s": IDLE_S,
            "cpu_s": round(trees_cpu, 3),
            "without_streams_cpu_s": round(none_cpu, 3),
            "ratio": round(trees_cpu / none_cpu, 2) if none_cpu else None,
        },
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
