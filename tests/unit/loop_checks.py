"""Checks the tool tests share: that the event loop kept turning while something ran, and
waiting (boundedly) for a process to be gone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
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


async def gone(pid: int, timeout_s: float = 5.0) -> bool:
    """Whether process `pid` has ended (or is a zombie) within `timeout_s`."""
    for _ in range(int(timeout_s / 0.1)):
        if not alive(pid):
            return True
        await asyncio.sleep(0.1)
    return not alive(pid)
