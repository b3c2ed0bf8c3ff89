"""Writing a streamed reply at its pace: frames batched into HTTP chunks, each chunk written when
its last frame is due, and a planned break (`disconnect`) struck where the plan says.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from grove.simulator.http11 import LAST_CHUNK, chunk, response_head
from grove.simulator.script import Inbound, Plan
from grove.simulator.wire import SSE_CONTENT_TYPE, SimulatedAPI


async def stream_reply(
    writer: asyncio.StreamWriter,
    api: SimulatedAPI,
    inbound: Inbound,
    plan: Plan,
    *,
    received: float,
    keep_alive: bool,
    limits: tuple[tuple[str, str], ...],
    events_per_write: int,
    before_end: Callable[[Inbound], None],
    bill: Callable[[int], None],
) -> bool:
    """A streamed answer (`bill` gets the reply tokens written; `before_end` the request before
    the frame that ends the reply); whether the connection may carry another."""
    headers = [
        ("content-type", SSE_CONTENT_TYPE),
        ("cache-control", "no-cache"),
        ("transfer-encoding", "chunked"),
        *api.response_headers(),
        *limits,
    ]
    writer.write(response_head(200, headers, keep_alive=keep_alive))
    fault = plan.fault
    if fault is not None and fault.kind == "error_after_200":
        payload = b"".join(frame.data for frame in api.error_frames(inbound))
        writer.write(chunk(payload) + LAST_CHUNK)
        await writer.drain()
        return keep_alive
    cut_after = fault.after if fault is not None and fault.kind == "disconnect" else None
    interval = 1.0 / plan.tps if plan.tps > 0 else 0.0
    first_content_at = received + plan.ttft_s
    batch_size = events_per_write
    pending: list[bytes] = []
    due = received
    content_sent = 0
    try:
        for frame in api.frames(plan, inbound):
            if cut_after is not None and (
                frame.role == "terminal" or (frame.role == "content" and content_sent >= cut_after)
            ):
                break
            if frame.role == "terminal":
                before_end(inbound)
            if frame.role == "content":
                due = max(due, first_content_at + content_sent * interval)
                content_sent += 1
            pending.append(frame.data)
            if len(pending) >= batch_size:
                await write_at(writer, pending, due)
                pending = []
        if pending:
            await write_at(writer, pending, due)
        if cut_after is not None:
            await flush_fully(writer)
            writer.transport.abort()
            return False
        writer.write(LAST_CHUNK)
        await writer.drain()
    except ConnectionError:
        # The client went away mid-answer (before a planned break, if any, struck): billed
        # its prompt and its reply as far as it was written, as a provider bills a request
        # it has begun to answer. A break the simulator makes itself raises nothing here.
        bill(content_sent)
        raise
    bill(plan.content_events)
    return keep_alive


async def sleep_until(deadline: float) -> None:
    delay = deadline - asyncio.get_running_loop().time()
    if delay > 0:
        await asyncio.sleep(delay)


async def write_at(writer: asyncio.StreamWriter, frames: list[bytes], due: float) -> None:
    """Frames sharing one write (one HTTP chunk), sent when the last of them is due."""
    await sleep_until(due)
    writer.write(chunk(b"".join(frames)))
    await writer.drain()


async def flush_fully(writer: asyncio.StreamWriter) -> None:
    """Wait until everything written has left the process, so an abort loses nothing."""
    writer.transport.set_write_buffer_limits(high=0)
    await writer.drain()
