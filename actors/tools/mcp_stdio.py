"""The stdio transport Grove gives the MCP SDK's `Client`: each message read with a size cap (a
longer one ends the connection, not the host's memory), and the server's whole process group
killed when the connection ends, whatever state the server or the session is in.

The SDK's own stdio client joins lines by copying its buffer for every chunk (a 200 MB answer
took minutes) and stops a server only when its shielded teardown is left to finish.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any

import anyio
import anyio.abc

if TYPE_CHECKING:  # the SDK is imported when a server starts: most hosts never start one
    from mcp.shared.message import SessionMessage

READ_CHUNK_BYTES = 1 << 16
EXIT_GRACE_S = 1.0  # after its stdin closes, a server has this long to exit by itself


@dataclass(kw_only=True)
class StdioServer:
    """How to start one server, the size cap of its messages, and what happened to it."""

    command: str
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    max_message_bytes: int
    pid: int | None = None  # set once the process runs
    oversized: bool = False  # set when a message passed max_message_bytes


@contextlib.asynccontextmanager
async def stdio_transport(server: StdioServer, errlog: IO[str]) -> AsyncIterator[Any]:
    """`(read stream, write stream)` of a server started from `server`, for `mcp.Client`."""
    import mcp_types
    from mcp.client.stdio import get_default_environment
    from mcp.shared.message import SessionMessage

    process = await anyio.open_process(
        [server.command, *server.args],
        env=get_default_environment() | server.env,
        cwd=server.cwd,
        stderr=errlog,
        start_new_session=True,  # its own process group: killed whole
    )
    server.pid = process.pid
    incoming_writer, incoming = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    outgoing, outgoing_reader = anyio.create_memory_object_stream[SessionMessage](0)

    def parsed(line: bytes) -> SessionMessage | Exception:
        try:
            return SessionMessage(mcp_types.jsonrpc_message_adapter.validate_json(line))
        except ValueError as exc:
            return exc

    async def read() -> None:
        assert process.stdout is not None
        buffer = bytearray()
        async with incoming_writer:
            with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError, OSError):
                while True:
                    buffer += await process.stdout.receive(READ_CHUNK_BYTES)
                    start = 0
                    while (end := buffer.find(b"\n", start)) >= 0:
                        if end > start:
                            await incoming_writer.send(parsed(bytes(buffer[start:end])))
                        start = end + 1
                    del buffer[:start]
                    if len(buffer) > server.max_message_bytes:
                        server.oversized = True  # the session sees the connection end
                        return

    async def write() -> None:
        assert process.stdin is not None
        async with outgoing_reader:
            with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                async for message in outgoing_reader:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.stdin.send(data.encode() + b"\n")

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(read)
        tasks.start_soon(write)
        try:
            yield incoming, outgoing
        finally:
            with anyio.CancelScope(shield=True):
                await stop_server(process)
            tasks.cancel_scope.cancel()


async def stop_server(process: anyio.abc.Process) -> None:
    """Close its stdin, give it EXIT_GRACE_S to go, then SIGKILL its process group; reaped."""
    if process.stdin is not None:
        with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            await process.stdin.aclose()
    with anyio.move_on_after(EXIT_GRACE_S):
        await process.wait()
    kill_group(process.pid)
    with anyio.move_on_after(EXIT_GRACE_S):
        await process.wait()


def kill_group(pid: int) -> None:
    """SIGKILL to the process group `pid` leads (a server and whatever it started)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
