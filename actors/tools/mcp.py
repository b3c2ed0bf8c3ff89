"""MCP servers through the official `mcp` SDK: one session per server per process (a host, or
the caller listing tools), opened on first use, shared, restarted once when the server is lost.

Tools appear as `mcp__SERVER__TOOL` with the server's own schemas; text and structured results
come back as text, images as images beside it (each wire carries them to the model). Every
wait is bounded: the start by `startup_timeout_s`, each call by `timeout_s` (a server that
misses it is stopped), each message by MAX_MESSAGE_BYTES as it is read.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import IO, Any

from grove.actors.agent.tool import Tool, ToolOutput
from grove.actors.errors import ToolError
from grove.actors.tools.grant import MCP_PREFIX
from grove.actors.tools.mcp_stdio import StdioServer, kill_group, stdio_transport
from grove.actors.tools.python import capped
from grove.providers.base import ImageData, ToolSpec

CLOSE_WAIT_S = 5.0  # the SDK's teardown and the server's end, before they are cut short
MAX_MESSAGE_BYTES = 16 * 1024 * 1024
STDERR_TAIL_CHARS = 2_000
log = logging.getLogger("grove.mcp")


@dataclass(frozen=True, kw_only=True, slots=True)
class McpServerConfig:
    """`[mcp.servers.NAME]`: a command (stdio) or a URL (streamable HTTP), and its limits."""

    name: str
    timeout_s: float  # what one call may take
    startup_timeout_s: float  # what starting the server and its handshake may take
    command: str | None = None
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = field(default=(), repr=False)  # tokens, often
    cwd: str | None = None
    url: str | None = None
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)


class McpServerError(ToolError):
    """A server that cannot be started, reached or listed; the text names it."""


class McpLost(Exception):
    """The session's connection ended under a call: the server died or was stopped."""


def mcp_tool_name(server: str, tool: str) -> str:
    return f"{MCP_PREFIX}{server}__{tool}"


@dataclass(kw_only=True, slots=True)
class _Session:
    """One open session, held by a task of its own (the SDK's contexts are task-bound)."""

    config: McpServerConfig
    client: Any = None
    stderr: IO[str] | None = None
    stdio: StdioServer | None = None
    oversized_http: list[int] = field(default_factory=list)  # sizes of refused HTTP answers
    task: asyncio.Task[None] | None = None
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    closing: asyncio.Event = field(default_factory=asyncio.Event)
    failure: BaseException | None = None

    async def open(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._hold())
        limit = self.config.startup_timeout_s
        try:
            await asyncio.wait_for(self.ready.wait(), limit)
        except TimeoutError:
            problem = self._problem(f"did not start within {limit:g} s (startup_timeout_s)")
            await self.close()
            raise McpServerError(problem) from None
        if self.failure is not None:
            # Before stderr is closed: its tail says more.
            problem = self._problem(f"failed to start: {failure_text(self.failure)}")
            await self.close()
            raise McpServerError(problem)

    async def _hold(self) -> None:
        from mcp import Client

        try:
            async with Client(self._transport(), message_handler=self._on_message) as client:
                self.client = client
                self.ready.set()
                await self.closing.wait()
        except BaseException as exc:  # reported to whoever waits for it
            self.failure = exc
        finally:
            self.client = None
            self.ready.set()

    async def _on_message(self, message: Any) -> None:
        """A server that answers with something that is not JSON-RPC fails its start at once
        instead of leaving the handshake waiting."""
        if isinstance(message, Exception) and not self.ready.is_set():
            self.failure = McpServerError("it sent something that is not JSON-RPC")
            self.ready.set()

    def _transport(self) -> Any:
        config = self.config
        if config.url is not None:
            import httpx2  # the SDK's own HTTP client
            from mcp.client.streamable_http import streamable_http_client

            from grove.actors.tools.mcp_http import capped_transport

            transport = capped_transport(MAX_MESSAGE_BYTES, self.oversized_http)
            http = httpx2.AsyncClient(
                headers=dict(config.headers),
                transport=transport,
                timeout=httpx2.Timeout(config.startup_timeout_s, read=None),  # calls: timeout_s
            )
            return streamable_http_client(
                config.url, http_client=http, max_sse_event_size=MAX_MESSAGE_BYTES
            )
        assert config.command is not None
        # Kept open while the server runs (closed with the session): its tail explains a failure.
        self.stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115
        self.stdio = StdioServer(
            command=config.command,
            args=config.args,
            env=dict(config.env),
            cwd=config.cwd,
            max_message_bytes=MAX_MESSAGE_BYTES,
        )
        return stdio_transport(self.stdio, self.stderr)

    def stopped_text(self) -> str:
        """What stopping this session does, for the reason given to the model."""
        if self.config.url is not None:
            return "its session was closed; the next call opens another"
        return "it was stopped and starts again on the next call"

    def oversized(self) -> bool:
        return bool((self.stdio is not None and self.stdio.oversized) or self.oversized_http)

    def _problem(self, what: str) -> str:
        tail = ""
        if self.stderr is not None:
            with contextlib.suppress(ValueError, OSError):
                self.stderr.seek(0)
                tail = self.stderr.read()[-STDERR_TAIL_CHARS:].strip()
        shown = f"; its stderr ends:\n{tail}" if tail else ""
        return f"MCP server {self.config.name} {what}{shown}"

    async def close(self) -> None:
        """End the session and the server, in CLOSE_WAIT_S at most (the SDK's teardown is
        cut short after that, and a stdio server's process group killed)."""
        self.closing.set()
        task = self.task
        if task is not None and not task.done():
            if self.ready.is_set():  # an open session sees `closing` and ends by itself
                await asyncio.wait({task}, timeout=CLOSE_WAIT_S)
            if not task.done():  # still in its handshake, or its teardown hangs
                task.cancel()
                await asyncio.wait({task}, timeout=CLOSE_WAIT_S)
        if self.stdio is not None and self.stdio.pid is not None:
            kill_group(self.stdio.pid)  # a no-op after a clean end
        if self.stderr is not None:
            self.stderr.close()


class McpPool:
    """The sessions of one process, one per server, shared by all its agents."""

    def __init__(self, servers: Mapping[str, McpServerConfig]) -> None:
        self.servers = dict(servers)
        self._sessions: dict[str, _Session] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def session(self, name: str, *, fresh: bool = False) -> _Session:
        if name not in self.servers:
            raise McpServerError(f"no MCP server named {name} is configured")
        async with self._locks.setdefault(name, asyncio.Lock()):
            current = self._sessions.get(name)
            if current is not None and (fresh or current.client is None):
                await current.close()
                current = None
            if current is None:
                current = _Session(config=self.servers[name])
                self._sessions[name] = current
                try:
                    await current.open()
                except McpServerError:
                    del self._sessions[name]
                    raise
            return current

    async def _stop(self, name: str, session: _Session) -> None:
        """Close `session` and forget it (the next call starts the server again)."""
        async with self._locks.setdefault(name, asyncio.Lock()):
            if self._sessions.get(name) is session:
                del self._sessions[name]
        await session.close()

    async def _request(self, name: str, session: _Session, what: str, request: Any) -> Any:
        """`request` on `session` within the server's `timeout_s`; a server that misses it, or
        sends a message over MAX_MESSAGE_BYTES, is stopped and named with the reason; McpLost
        when its connection ends under the request."""
        limit = self.servers[name].timeout_s
        try:
            async with asyncio.timeout(limit):
                return await request
        except TimeoutError:
            problem = session._problem(
                f"did not answer {what} within {limit:g} s (timeout_s); {session.stopped_text()}"
            )
            await self._stop(name, session)
            raise McpServerError(problem) from None
        except Exception as exc:
            if session.oversized():
                await self._stop(name, session)
                raise McpServerError(
                    f"MCP server {name} answered {what} with a message over "
                    f"{MAX_MESSAGE_BYTES:,} bytes, the limit; {session.stopped_text()}"
                ) from None
            if session.client is None or session.task is None or session.task.done():
                raise McpLost(str(exc) or type(exc).__name__) from exc
            raise

    async def list_tools(self, name: str) -> list[ListedTool]:
        session = await self.session(name)
        try:
            listed = await self._request(
                name, session, "the tool list", session.client.list_tools()
            )
        except McpLost as lost:
            raise McpServerError(
                session._problem(f"ended while listing its tools: {lost}")
            ) from None
        return [
            ListedTool(
                spec=ToolSpec(
                    name=mcp_tool_name(name, tool.name),
                    description=tool.description or tool.name,
                    parameters=dict(tool.input_schema or {"type": "object", "properties": {}}),
                ),
                idempotent=said_idempotent(tool),
            )
            for tool in listed.tools
        ]

    async def call(self, name: str, tool: str, arguments: dict[str, Any]) -> str | ToolOutput:
        """The tool's result as text; a server lost under a call is started again once."""
        for attempt in (1, 2):
            session = await self.session(name, fresh=attempt == 2)
            try:
                result = await self._request(
                    name, session, f"the call to {tool}", session.client.call_tool(tool, arguments)
                )
                break
            except McpServerError:
                raise
            except Exception as exc:
                if attempt == 2:
                    reason = str(exc) or type(exc).__name__
                    raise McpServerError(
                        session._problem(f"failed the call to {tool}: {reason}")
                    ) from None
        text = result_text(result)
        if getattr(result, "is_error", False):
            raise ToolError(text or f"{tool} failed")
        images = tuple(
            ImageData(media_type=block.mime_type, data=block.data)
            for block in getattr(result, "content", None) or []
            if getattr(block, "type", "") == "image"
        )
        return ToolOutput(text=capped(text), images=images) if images else capped(text)

    async def close(self) -> None:
        sessions = list(self._sessions.values())
        self._sessions.clear()
        await asyncio.gather(*(session.close() for session in sessions))

    def tool(self, spec: ToolSpec, idempotent: bool = False) -> Tool:
        server, _, name = spec.name[len(MCP_PREFIX) :].partition("__")

        async def run(arguments: dict[str, Any]) -> str | ToolOutput:
            return await self.call(server, name, arguments)

        return Tool(spec=spec, run=run, idempotent=idempotent)


def failure_text(failure: BaseException) -> str:
    """Why a server did not start, from the error at the bottom of the SDK's task groups: a
    command that cannot be run, a server that exited before answering, or the error's text."""
    while isinstance(failure, BaseExceptionGroup) and failure.exceptions:
        failure = failure.exceptions[0]
    if isinstance(failure, OSError) and failure.filename is not None:
        return f"cannot run {failure.filename!r}: {failure.strerror or failure}"
    text = str(failure).strip()
    if text == "Connection closed":  # the SDK's words for a server gone before its handshake
        return "it exited (or closed its output) before the MCP handshake"
    return text.splitlines()[0] if text else type(failure).__name__


def result_text(result: Any) -> str:
    """Text blocks as they are, structured content as JSON; images (which travel beside the
    text) and other blocks noted."""
    pieces: list[str] = []
    for block in getattr(result, "content", None) or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            pieces.append(block.text)
        elif kind == "image":
            pieces.append(f"[image {getattr(block, 'mime_type', '?')}, attached]")
        else:
            pieces.append(f"[{kind or 'unknown'} content]")
    structured = getattr(result, "structured_content", None)
    if structured is not None and not pieces:
        pieces.append(json.dumps(structured, ensure_ascii=False))
    return "\n".join(pieces)


@dataclass(frozen=True, kw_only=True, slots=True)
class ListedTool:
    """A server's tool as listed: its schema, and whether its annotations say a call may run
    twice without a second effect (`readOnlyHint` or `idempotentHint`)."""

    spec: ToolSpec
    idempotent: bool = False


def said_idempotent(tool: Any) -> bool:
    """Whether an MCP tool's annotations call it read-only or idempotent."""
    annotations = getattr(tool, "annotations", None)
    return bool(
        annotations is not None
        and (
            getattr(annotations, "read_only_hint", None)
            or getattr(annotations, "idempotent_hint", None)
        )
    )


async def list_server_tools(
    servers: Mapping[str, McpServerConfig],
) -> dict[str, list[ListedTool]]:
    """Each configured server's tools by its name, listed from this process (all servers at
    once) and closed again; a server that cannot be started or listed is one warning (with its
    stderr's tail) and left out."""
    pool = McpPool(servers)

    async def listed(name: str) -> list[ListedTool] | None:
        try:
            return await pool.list_tools(name)
        except Exception as exc:  # any failure: warn, go on without
            log.warning(
                "%s", exc if isinstance(exc, McpServerError) else f"MCP server {name}: {exc}"
            )
            return None

    try:
        found = await asyncio.gather(*(listed(name) for name in servers))
    finally:
        await pool.close()
    return {name: specs for name, specs in zip(servers, found, strict=True) if specs is not None}
