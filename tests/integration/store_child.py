"""A separate process for the store tests: writes through the store or holds a session lease.

Run as `python -m tests.integration.store_child MODE URL ARG`; it prints one line per step
and runs until its parent kills it. Test code only.
"""

from __future__ import annotations

import asyncio
import sys

from grove.supervisor.store import open_store

CHILD_LEASE_TTL_S = 0.5


def append_forever(url: str, agent_uuid: str) -> None:
    """Append messages one after another; print each id once its write has returned."""
    store = open_store(url)
    number = 0
    while True:
        message = store.append_message(agent_uuid, "user", f"message {number}")
        print(message.id, flush=True)
        number += 1


async def hold_lease_forever(url: str, session_id: str) -> None:
    """Take the session's lease (short TTL, so a kill frees it quickly) and keep it."""
    store = open_store(url, lease_ttl_s=CHILD_LEASE_TTL_S)
    async with store.lease(session_id, timeout_s=30.0):
        print("held", flush=True)
        await asyncio.sleep(3600)


def main() -> None:
    mode, url, argument = sys.argv[1:4]
    if mode == "append":
        append_forever(url, argument)
    elif mode == "hold-lease":
        asyncio.run(hold_lease_forever(url, argument))
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main()
