"""Workspace tools that change things: `write` (a whole file, atomically), `edit` (exact text
replacement) and `bash` (a command in the workspace root, in sandbox.py's sandbox), confined
like the read-only tools; none of them changes `.git` (hooks and config run outside any sandbox).

Each is a typed function made a tool by python.py; their policy (ask by default) is the
supervisor's. A command's whole process group dies on timeout or when its turn is cancelled.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from grove.actors.agent.tool import Tool
from grove.actors.errors import ToolError
from grove.actors.tools.python import capped, python_tool, tool
from grove.actors.tools.sandbox import SandboxPolicy
from grove.actors.tools.sandbox_run import KILL_GRACE_S, run_process
from grove.actors.tools.workspace import Workspace, WorkspaceError

MAX_WRITE_BYTES = 10 * 1024 * 1024
DEFAULT_BASH_TIMEOUT_S = 120.0
MAX_BASH_TIMEOUT_S = 600.0
BASH_OUTPUT_CHARS = 30_000
EDITING_TOOL_NAMES = ("write", "edit", "bash")


def editing_tools(root: Path, sandbox: SandboxPolicy | None = None) -> dict[str, Tool]:
    """`write`, `edit` and `bash` over the workspace at `root`; bash in `sandbox` (default:
    the default policy, workspace-write without network)."""
    workspace = Workspace(root)
    policy = sandbox or SandboxPolicy()

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
        return await run_command(workspace, command, timeout_s, policy)

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


async def run_command(
    workspace: Workspace, command: str, timeout_s: float, policy: SandboxPolicy
) -> str:
    if not command.strip():
        raise ToolError("`command` is empty")
    if not (0 < timeout_s <= MAX_BASH_TIMEOUT_S):  # also refuses NaN
        raise ToolError(f"`timeout_s` must be above 0 and at most {MAX_BASH_TIMEOUT_S:g}")
    output = KeptOutput(BASH_OUTPUT_CHARS)
    try:
        code = await run_process(
            ["bash", "-c", command], workspace.real_root, policy, timeout_s, output.add
        )
    except TimeoutError:
        raise ToolError(
            f"Command timed out after {timeout_s:g} s; it and its children were killed"
        ) from None
    return f"exit code {code}\n{output.text()}"


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


def _target(workspace: Workspace, path: str) -> Path:
    try:
        target = workspace.resolve(path)
    except WorkspaceError as exc:
        raise ToolError(str(exc)) from None
    if ".git" in target.relative_to(workspace.real_root).parts:
        raise ToolError(f"{path} is in .git, which the workspace tools do not change")
    return target


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
