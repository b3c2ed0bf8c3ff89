"""Fan-in, for `/wait` and the `wait` tool: each named agent's result or status once its turn
ends, or else the waiter's first mail, for as long as anything that could send one works.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from grove.supervisor.core import SupervisorCore


async def wait_for(
    core: SupervisorCore,
    waiter: str,
    uuids: Sequence[str],
    timeout_s: float,
    *,
    own_turn: bool = True,
) -> dict[str, dict[str, Any]]:
    """Each of `uuids` with its result or status once their turns ended (or at the timeout);
    without `uuids`, the waiter's first mail (`{}` when none came)."""
    if not uuids:
        return await first_mail(core, waiter, timeout_s, own_turn=own_turn)
    waits = [asyncio.ensure_future(core.live(uuid).turn_done.wait()) for uuid in uuids]
    _, pending = await asyncio.wait(waits, timeout=timeout_s)
    for waiting in pending:
        waiting.cancel()
    results: dict[str, dict[str, Any]] = {}
    for uuid in uuids:
        state = core.live(uuid)
        record = core.agent(uuid)
        if state.ticket_id is not None:
            results[uuid] = {"status": "running"}
        elif record.status != "running":
            results[uuid] = {"status": record.status}
        elif state.last_result is None:
            results[uuid] = {"status": "idle", "text": last_answer(core, uuid)}
        elif state.last_result.ok:
            results[uuid] = {"status": "done", "text": state.last_result.text}
        else:
            results[uuid] = {"status": "error", "text": state.last_result.error or ""}
        if state.last_result is not None and state.last_result.worktree:
            results[uuid].update(state.last_result.worktree)  # its branch and diff stat
    return results


async def first_mail(
    core: SupervisorCore, waiter: str, timeout_s: float, *, own_turn: bool
) -> dict[str, dict[str, Any]]:
    """The waiter's first mail within `timeout_s`, or `{}` as soon as nothing that could send
    one is at work: no agent of the waiter's tree in a turn (the waiter's own counts with
    `own_turn`; not for the `wait` tool, whose caller's turn is the one waiting)."""
    mailbox = core.live(waiter).mail
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        root = core.root_of(core.agent(waiter))
        tree = [root.uuid, *(agent.uuid for agent in core.descendants(root.uuid))]
        senders = [uuid for uuid in tree if own_turn or uuid != waiter]
        ends = [end for uuid in senders if (end := core.turn_end(uuid)) is not None]
        left = deadline - asyncio.get_running_loop().time()
        if mailbox.empty() and (not ends or left <= 0):
            return {}
        arrival = asyncio.ensure_future(mailbox.get())
        watched = [asyncio.ensure_future(end.wait()) for end in ends]
        done, _ = await asyncio.wait(
            [arrival, *watched], timeout=max(left, 0), return_when=asyncio.FIRST_COMPLETED
        )
        for waiting in watched:
            waiting.cancel()
        if arrival in done:
            mail = arrival.result()
            sender = str(mail.data.get("sender", "?"))
            return {sender: {"status": "mail", "text": mail.content}}
        arrival.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await arrival


def last_answer(core: SupervisorCore, uuid: str) -> str:
    for message in reversed(core.store.agent_messages(uuid)):
        if message.kind == "assistant":
            return message.content
    return ""
