"""Two Ray nodes (a head and a worker) on 127.0.0.1 in one launcher process, for cluster.sh.

Only Ray's own cluster utilities live here; Redis, pid files and exports are cluster.sh's job.

Why not two `ray start` commands: `ray start` rewrites 127.0.0.1 to the machine's public
address, and a node whose address is not 127.0.0.1 listens on every interface. Nodes made with
`ray.cluster_utils.Cluster` keep 127.0.0.1, so Ray listens on loopback only.

Prints `head ADDRESS`, then `ready ADDRESS` once both nodes are up, and blocks. SIGUSR1
removes the worker node (`worker removed`); SIGTERM, SIGINT or SIGHUP stop both (`stopped`).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
from pathlib import Path
from types import FrameType
from typing import Any

LOOPBACK = "127.0.0.1"
MIN_OBJECT_STORE_BYTES = 80 * 1024 * 1024


def parse_arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--temp-dir", type=Path, required=True, help="one subdirectory per node")
    parser.add_argument("--head-cpus", type=int, default=1)
    parser.add_argument("--worker-cpus", type=int, default=1)
    parser.add_argument("--object-store-bytes", type=int, default=200 * 1024 * 1024)
    arguments = parser.parse_args(argv)
    if arguments.head_cpus < 1 or arguments.worker_cpus < 1:
        parser.error("--head-cpus and --worker-cpus must be at least 1")
    if arguments.object_store_bytes < MIN_OBJECT_STORE_BYTES:
        parser.error(f"--object-store-bytes must be at least {MIN_OBJECT_STORE_BYTES}")
    return arguments


def free_loopback_ports(count: int) -> list[int]:
    """`count` distinct ports free on 127.0.0.1 right now (held together while chosen)."""
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind((LOOPBACK, 0))
        return [int(sock.getsockname()[1]) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def announce(line: str) -> None:
    print(line, flush=True)


def run(arguments: argparse.Namespace) -> None:
    temp_root = arguments.temp_dir.resolve()
    # Ray's "current cluster" file goes under RAY_TMPDIR: the machine's /tmp/ray stays untouched.
    os.environ["RAY_TMPDIR"] = str(temp_root)
    (temp_root / "ray").mkdir(parents=True, exist_ok=True)
    from ray.cluster_utils import Cluster

    gcs_port, head_agent_port, worker_agent_port = free_loopback_ports(3)
    cluster: Any = Cluster(
        initialize_head=True,
        head_node_args={
            "node_ip_address": LOOPBACK,
            "gcs_server_port": gcs_port,
            "dashboard_agent_listen_port": head_agent_port,
            "include_dashboard": False,
            "num_cpus": arguments.head_cpus,
            "resources": {"grove_local_head": 1},
            "object_store_memory": arguments.object_store_bytes,
            "temp_dir": str(temp_root / "head"),
        },
    )
    announce(f"head {cluster.gcs_address}")
    worker = cluster.add_node(
        node_ip_address=LOOPBACK,
        dashboard_agent_listen_port=worker_agent_port,
        num_cpus=arguments.worker_cpus,
        resources={"grove_local_worker": 1},
        object_store_memory=arguments.object_store_bytes,
        temp_dir=str(temp_root / "worker"),
    )

    def stop(signum: int, frame: FrameType | None) -> None:
        cluster.shutdown()
        announce("stopped")
        sys.exit(0)

    def remove_worker(signum: int, frame: FrameType | None) -> None:
        if worker in cluster.worker_nodes:
            cluster.remove_node(worker)
        announce("worker removed")

    for stop_signal in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(stop_signal, stop)
    signal.signal(signal.SIGUSR1, remove_worker)
    announce(f"ready {cluster.gcs_address}")
    while True:
        signal.pause()


def main() -> None:
    run(parse_arguments(sys.argv[1:]))


if __name__ == "__main__":
    main()
