"""Real MCP servers for the tests, written with the SDK's MCPServer (FastMCP in mcp 1.x), and
the ways tests run and find them.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.conftest import free_loopback_port

START_TIMEOUT_S = 60.0


@contextmanager
def served_over_http(script: Path, *options: str) -> Iterator[str]:
    """`script --http PORT OPTIONS` in a process of its own; its URL once it answers; stopped
    through its handle."""
    port = free_loopback_port()
    command = [sys.executable, str(script), "--http", str(port), *options]
    with subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as server:
        url = f"http://127.0.0.1:{port}/mcp"
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                httpx.get(url, timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.2)
        try:
            yield url
        finally:
            server.kill()  # a server may be stuck in a tool that never returns
            server.wait(10)


def running(
    script: Path, *, with_word: str | None = None, without_word: str | None = None
) -> list[int]:
    """The live processes running `script`, with or without an argument `with_word` /
    `without_word`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if str(script).encode() not in command:
            continue
        if with_word is not None and with_word.encode() not in command:
            continue
        if without_word is not None and without_word.encode() in command:
            continue
        found.append(int(entry.name))
    return found
