"""Checks the tool tests share: that the event loop kept turning while something ran, and
waiting (boundedly) for a process to be gone, by pid or by a word of its command line.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")
TICK_S = 0.05


async def with_ticks(work: Awaitable[T]) -> tuple[T, int]:
    """`work`'s result, and how many TICK_S sleeps another task finished meanwhile."""
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(TICK_S)
            ticks += 1

    ticking = asyncio.create_task(ticker())
    try:
        result = await work
    finally:
        ticking.cancel()
    return result, ticks


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


async def eventually(check: Callable[[], bool], timeout_s: float) -> bool:
    """Whether `check()` holds within `timeout_s` (looked at every TICK_S)."""
    for _ in range(int(timeout_s / TICK_S)):
        if check():
            return True
        await asyncio.sleep(TICK_S)
    return check()


async def gone(pid: int, timeout_s: float = 5.0) -> bool:
    """Whether process `pid` has ended (or is a zombie) within `timeout_s`."""
    return await eventually(lambda: not alive(pid), timeout_s)


def running_with(marker: str) -> list[int]:
    """The live processes (seen from here, whatever namespace they run in) whose command line
    holds `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            words = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if marker.encode() in words and alive(int(entry.name)):
            found.append(int(entry.name))
    return found


async def appears(marker: str, timeout_s: float = 10.0) -> bool:
    """Whether a process whose command line holds `marker` is running within `timeout_s`."""
    return await eventually(lambda: bool(running_with(marker)), timeout_s)


async def all_gone(marker: str, timeout_s: float = 5.0) -> bool:
    """Whether every process whose command line holds `marker` has ended within `timeout_s`."""
    return await eventually(lambda: not running_with(marker), timeout_s)
