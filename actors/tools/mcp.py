"""MCP servers through the official `mcp` SDK: one session per server per process (a host, or
the caller listing tools), opened on first use, shared, restarted once when a call fails on it.

Tools appear as `mcp__SERVER__TOOL` with the server's own schemas; text and structured results
come back as text, images as images beside it (each wire carries them to the model).
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

from actors.agent import Tool, ToolError, ToolOutput
from actors.tools.grant import MCP_PREFIX
from actors.tools.python import capped
from providers.base import ImageData, ToolSpec

OPEN_TIMEOUT_S = 30.0
CALL_TIMEOUT_S = 120.0
CLOSE_GRACE_S = 2.0
STDERR_TAIL_CHARS = 2_000
log = logging.getLogger("grove.mcp")


@dataclass(frozen=True, kw_only=True, slots=True)
class McpServerConfig:
    """`[mcp.servers.NAME]`: a command (stdio) or a URL (streamable HTTP)."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    cwd: str | None = None
    url: str | None = None
    headers: tuple[tuple[str, str], ...] = ()


class McpServerError(ToolError):
    """A server that cannot be started, reached or listed; the text names it."""


def mcp_tool_name(server: str, tool: str) -> str:
    return f"{MCP_PREFIX}{server}__{tool}"


@dataclass(kw_only=True, slots=True)
class _Session:
    """One open session, held by a task of its own (the SDK's contexts are task-bound)."""

    config: McpServerConfig
    client: Any = None
    stderr: IO[str] | None = None
    task: asyncio.Task[None] | None = None
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    closing: asyncio.Event = field(default_factory=asyncio.Event)
    failure: BaseException | None = None

    async def open(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._hold())
        try:
            await asyncio.wait_for(self.ready.wait(), OPEN_TIMEOUT_S)
        except TimeoutError:
            await self.close()
            raise McpServerError(self._problem("did not start")) from None
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

            http = httpx2.AsyncClient(headers=dict(config.headers))
            return streamable_http_client(config.url, http_client=http)
        from mcp.client.stdio import StdioServerParameters, stdio_client

        assert config.command is not None
        # Kept open while the server runs (closed with the session): its tail explains a failure.
        self.stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115
        parameters = StdioServerParameters(
            command=config.command, args=list(config.args), env=dict(config.env), cwd=config.cwd
        )
        return stdio_client(parameters, errlog=self.stderr)

    def _problem(self, what: str) -> str:
        tail = ""
        if self.stderr is not None:
            with contextlib.suppress(ValueError, OSError):
                self.stderr.seek(0)
                tail = self.stderr.read()[-STDERR_TAIL_CHARS:].strip()
        shown = f"; its stderr ends:\n{tail}" if tail else ""
        return f"MCP server {self.config.name} {what}{shown}"

    async def close(self) -> None:
        self.closing.set()
        if self.task is not None:
            # A session still in its handshake does not see `closing`: it is cancelled.
            done, _ = await asyncio.wait({self.task}, timeout=CLOSE_GRACE_S)
            if not done:
                self.task.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(self.task, OPEN_TIMEOUT_S)
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

    async def list_tools(self, name: str) -> list[ToolSpec]:
        session = await self.session(name)
        listed = await asyncio.wait_for(session.client.list_tools(), OPEN_TIMEOUT_S)
        return [
            ToolSpec(
                name=mcp_tool_name(name, tool.name),
                description=tool.description or tool.name,
                parameters=dict(tool.input_schema or {"type": "object", "properties": {}}),
            )
            for tool in listed.tools
        ]

    async def call(self, name: str, tool: str, arguments: dict[str, Any]) -> str | ToolOutput:
        """The tool's result as text; a server that fails the call is started again once."""
        for attempt in (1, 2):
            session = await self.session(name, fresh=attempt == 2)
            try:
                result = await asyncio.wait_for(
                    session.client.call_tool(tool, arguments), CALL_TIMEOUT_S
                )
                break
            except Exception as exc:
                if attempt == 2:
                    raise McpServerError(
                        session._problem(f"failed the call to {tool}: {exc}")
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
        for session in list(self._sessions.values()):
            await session.close()
        self._sessions.clear()

    def tool(self, spec: ToolSpec) -> Tool:
        server, _, name = spec.name[len(MCP_PREFIX) :].partition("__")

        async def run(arguments: dict[str, Any]) -> str | ToolOutput:
            return await self.call(server, name, arguments)

        return Tool(spec=spec, run=run)


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


async def list_server_tools(servers: Mapping[str, McpServerConfig]) -> list[ToolSpec]:
    """Every configured server's tools, listed from this process and closed again; a server
    that cannot be started or listed is one warning (with its stderr's tail) and no tools."""
    pool = McpPool(servers)
    found: list[ToolSpec] = []
    try:
        for name in servers:
            try:
                found += await pool.list_tools(name)
            except (McpServerError, Exception) as exc:  # any failure: warn, go on without
                log.warning(
                    "%s", exc if isinstance(exc, McpServerError) else f"MCP server {name}: {exc}"
                )
    finally:
        await pool.close()
    return found
