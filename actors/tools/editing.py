"""Workspace tools that change things: `write` (a whole file, atomically), `edit` (exact text
replacement) and `bash` (a command in the workspace root), confined like the read-only tools.

Each is a typed function made a tool by python.py; their policy (ask by default) is the
supervisor's. A command's whole process group dies on timeout or when its turn is cancelled.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import tempfile
from pathlib import Path

from actors.agent import Tool, ToolError
from actors.tools.python import capped, python_tool, tool
from actors.tools.workspace import Workspace, WorkspaceError
from providers.credentials import API_KEY_ENV

MAX_WRITE_BYTES = 10 * 1024 * 1024
DEFAULT_BASH_TIMEOUT_S = 120.0
MAX_BASH_TIMEOUT_S = 600.0
BASH_OUTPUT_CHARS = 30_000
KILL_GRACE_S = 2.0
READ_CHUNK_BYTES = 1 << 16
# Names of variables a command never sees: the providers' keys, and anything named like one.
_SECRET_NAME_PARTS = ("API_KEY", "TOKEN", "SECRET", "PASSWORD")


def editing_tools(root: Path) -> dict[str, Tool]:
    """`write`, `edit` and `bash` over the workspace at `root`."""
    workspace = Workspace(root)

    def write(path: str, content: str) -> str:
        """Create or replace a file of the workspace with `content` (the whole file).

        Args:
            path: The file, relative to the workspace root; missing directories are made.
            content: The file's complete new text.
        """
        return write_file(workspace, path, content)

    def edit(path: str, old: str, new: str, count: int | None = None) -> str:
        """Replace the exact text `old` with `new` in a file of the workspace. `old` must
        occur exactly once, or exactly `count` times when `count` is given.

        Args:
            path: The file, relative to the workspace root.
            old: The text to replace, exactly as it is in the file (whitespace included).
            new: The text to put in its place.
            count: How many occurrences to replace, when there is more than one.
        """
        return edit_file(workspace, path, old, new, count)

    @tool(timeout_s=MAX_BASH_TIMEOUT_S + KILL_GRACE_S + 5)
    async def bash(command: str, timeout_s: float = DEFAULT_BASH_TIMEOUT_S) -> str:
        """Run a shell command in the workspace root and return its exit code and output
        (stdout and stderr together, long output cut in the middle).

        Args:
            command: The command, run by bash.
            timeout_s: Seconds before the command and everything it started are killed.
        """
        return await run_command(workspace, command, timeout_s)

    made = (python_tool(function) for function in (write, edit, bash))
    return {tool.name: tool.as_tool() for tool in made}


def write_file(workspace: Workspace, path: str, content: str) -> str:
    encoded = content.encode("utf-8", errors="surrogatepass")
    if len(encoded) > MAX_WRITE_BYTES:
        raise ToolError(
            f"content is {len(encoded):,} bytes; write takes at most {MAX_WRITE_BYTES:,}"
        )
    target = _target(workspace, path)
    existed = target.exists()
    if existed and not target.is_file():
        raise ToolError(f"not a regular file: {path}")
    target.parent.mkdir(parents=True, exist_ok=True)
    if not workspace.contains(Path(os.path.realpath(target.parent))):
        raise ToolError(f"path leads outside the workspace through a symlink: {path}")
    _replace(target, encoded)
    verb = "replaced" if existed else "created"
    return f"{verb} {workspace.relative(target)} ({len(encoded):,} bytes)"


def edit_file(workspace: Workspace, path: str, old: str, new: str, count: int | None) -> str:
    if not old:
        raise ToolError("`old` is empty: name the exact text to replace")
    if count is not None and count < 1:
        raise ToolError("`count` must be 1 or more")
    target = _target(workspace, path)
    if not target.is_file():
        raise ToolError(f"no such file: {path}")
    if target.stat().st_size > MAX_WRITE_BYTES:
        raise ToolError(f"{path} is over {MAX_WRITE_BYTES:,} bytes; edit changes smaller files")
    try:
        text = target.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(f"{path} is not UTF-8 text; edit changes text files only") from None
    found = text.count(old)
    if found == 0:
        raise ToolError(
            f"`old` was not found in {path}; read the file again and copy the text exactly"
        )
    if count is None and found > 1:
        raise ToolError(
            f"`old` occurs {found} times in {path}; add surrounding text to make it unique, "
            f"or pass count={found} to replace them all"
        )
    if count is not None and count != found:
        raise ToolError(f"`old` occurs {found} times in {path}, not {count}")
    updated = text.replace(old, new)
    if len(updated.encode("utf-8")) > MAX_WRITE_BYTES:
        raise ToolError(f"the edited file would be over {MAX_WRITE_BYTES:,} bytes")
    _replace(target, updated.encode("utf-8"))
    replaced = "1 replacement" if found == 1 else f"{found} replacements"
    return f"edited {workspace.relative(target)}: {replaced}"


async def run_command(workspace: Workspace, command: str, timeout_s: float) -> str:
    if not command.strip():
        raise ToolError("`command` is empty")
    if not (0 < timeout_s <= MAX_BASH_TIMEOUT_S):  # also refuses NaN
        raise ToolError(f"`timeout_s` must be above 0 and at most {MAX_BASH_TIMEOUT_S:g}")
    process = await asyncio.create_subprocess_exec(
        "bash",
        "-c",
        command,
        cwd=workspace.real_root,
        env=command_environment(),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,  # its own process group, killed whole
    )
    output = KeptOutput(BASH_OUTPUT_CHARS)
    try:
        async with asyncio.timeout(timeout_s):
            assert process.stdout is not None
            while chunk := await process.stdout.read(READ_CHUNK_BYTES):
                output.add(chunk)
            await process.wait()
    except TimeoutError:
        await _kill_group(process)
        raise ToolError(
            f"Command timed out after {timeout_s:g} s; it and its children were killed"
        ) from None
    except asyncio.CancelledError:
        await _kill_group(process)
        raise
    return f"exit code {process.returncode}\n{output.text()}"


class KeptOutput:
    """What is shown of a command's output, however much it writes: its head and its tail
    (kept as it is read; the middle is only counted)."""

    def __init__(self, limit_chars: int) -> None:
        self.limit = limit_chars
        self.keep = limit_chars * 4  # bytes: enough for `limit` characters at either end
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def add(self, chunk: bytes) -> None:
        room = self.keep - len(self.head)
        self.head += chunk[:room]
        self.tail += chunk[room:]
        if len(self.tail) > self.keep:
            self.dropped += len(self.tail) - self.keep
            del self.tail[: len(self.tail) - self.keep]

    def text(self) -> str:
        if not self.dropped:
            return capped((self.head + self.tail).decode("utf-8", errors="replace"), self.limit)
        head_chars = self.limit * 3 // 4
        head = self.head.decode("utf-8", errors="replace")[:head_chars]
        tail = self.tail.decode("utf-8", errors="replace")[-(self.limit - head_chars) :]
        return f"{head}\n[... more than {self.dropped:,} bytes cut ...]\n{tail}"


def command_environment() -> dict[str, str]:
    """The host's environment without the providers' keys or anything named like a secret."""
    keys = {name for names in API_KEY_ENV.values() for name in names}
    return {
        name: value
        for name, value in os.environ.items()
        if name not in keys and not any(part in name.upper() for part in _SECRET_NAME_PARTS)
    }


async def _kill_group(process: asyncio.subprocess.Process) -> None:
    """SIGTERM to the command's whole process group, SIGKILL after a grace; then reap it."""
    for signum in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signum)
        try:
            async with asyncio.timeout(KILL_GRACE_S):
                await process.wait()
        except TimeoutError:
            continue
        if signum == signal.SIGTERM:
            # The leader is gone; whatever it started in the group gets the SIGKILL too.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
        return


def _target(workspace: Workspace, path: str) -> Path:
    try:
        return workspace.resolve(path)
    except WorkspaceError as exc:
        raise ToolError(str(exc)) from None


def _replace(target: Path, data: bytes) -> None:
    """Write `data` to a temporary file beside `target`, then rename it over `target`."""
    mode = target.stat().st_mode & 0o7777 if target.exists() else 0o644
    descriptor, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
