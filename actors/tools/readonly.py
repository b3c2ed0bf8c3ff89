"""Read-only workspace tools for reviewers: `read`, `search` and `find`, confined to one root.

Nothing here writes, runs commands or leaves the workspace (see `Workspace.resolve`). Each call
runs in a thread within its `WorkBudget` (time, entries) and stops when its caller stops
waiting; what it found by then comes back with a note saying why it stopped.
"""

from __future__ import annotations

import asyncio
import heapq
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from grove.actors.agent.tool import Tool
from grove.actors.tools.bounds import WorkBudget, WorkStopped
from grove.actors.tools.patterns import compile_pattern
from grove.actors.tools.workspace import (
    BINARY_SNIFF_BYTES,
    GlobMatcher,
    WalkedFile,
    Workspace,
    WorkspaceError,
    is_binary,
)
from grove.providers.base import ToolSpec

READ_MAX_LINES = 2000
READ_MAX_CHARS = 100_000
LINE_MAX_CHARS = 2000
SEARCH_MAX_MATCHES = 200
SEARCH_LINE_MAX_CHARS = 500
SEARCH_MAX_FILE_BYTES = 10 * 1024 * 1024
FIND_MAX_PATHS = 500
SPEND_EVERY_LINES = 1024  # how often a long read or search looks at its budget
STOP_GRACE_S = 5.0  # past its time limit, a call's caller stops waiting for it
_LINE_MAX_BYTES = LINE_MAX_CHARS * 4 + 4  # enough for LINE_MAX_CHARS characters and one more
_SKIP_CHUNK_BYTES = 1 << 16
READONLY_TOOL_NAMES = ("read", "search", "find")
_JSON_TYPE_NAMES = {"string": "a string", "integer": "an integer", "boolean": "true or false"}

_PATH_IN_WORKSPACE = (
    "relative to the workspace root (an absolute path must lie inside it; `..` and symlinks "
    "may not lead outside)"
)
READ = ToolSpec(
    name="read",
    description=(
        "Show a text file of the workspace with line numbers (`N<TAB>text`). Long files are "
        f"shown {READ_MAX_LINES} lines at a time: a note at the end says how to read on. "
        "Binary files are refused."
    ),
    parameters={
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": f"The file, {_PATH_IN_WORKSPACE}."},
            "offset": {
                "type": "integer",
                "minimum": 1,
                "description": "The first line to show, counting from 1. Default: 1.",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": READ_MAX_LINES,
                "description": f"How many lines to show at most. Default: {READ_MAX_LINES}.",
            },
        },
        "required": ["path"],
        "additionalProperties": False,
    },
)
SEARCH = ToolSpec(
    name="search",
    description=(
        "Search the workspace's text files for lines matching `pattern` (a Python regular "
        "expression, or plain text with `literal`). Returns `path:line: text` per match, at "
        f"most {SEARCH_MAX_MATCHES}. Binary files and `.git` are skipped."
    ),
    parameters={
        "type": "object",
        "properties": {
            "pattern": {
                "type": "string",
                "description": "What to look for in each line: a regular expression by default.",
            },
            "path": {
                "type": "string",
                "description": f"A directory or file to search, {_PATH_IN_WORKSPACE}. "
                "Default: the whole workspace.",
            },
            "include": {
                "type": "string",
                "description": "Only files matching this glob, e.g. `*.py` (file name) or "
                "`src/**/*.ts` (path below `path`).",
            },
            "literal": {
                "type": "boolean",
                "description": "Match `pattern` as plain text, not as a regular expression. "
                "Default: false.",
            },
            "ignore_case": {
                "type": "boolean",
                "description": "Match regardless of letter case. Default: false.",
            },
        },
        "required": ["pattern"],
        "additionalProperties": False,
    },
)
FIND = ToolSpec(
    name="find",
    description=(
        "List the workspace's files whose path matches a glob, sorted, at most "
        f"{FIND_MAX_PATHS}. `.git` is skipped."
    ),
    parameters={
        "type": "object",
        "properties": {
            "pattern": {
                "type": "string",
                "description": "A glob: `*.py` matches file names at any depth; a pattern "
                "with `/` such as `src/**/test_*.py` matches the path below `path`. `*` and "
                "`?` stay within one directory, `**` spans directories, `{a,b}` alternates.",
            },
            "path": {
                "type": "string",
                "description": f"The directory to look in, {_PATH_IN_WORKSPACE}. "
                "Default: the whole workspace.",
            },
        },
        "required": ["pattern"],
        "additionalProperties": False,
    },
)


def readonly_tools(root: Path) -> dict[str, Tool]:
    """`read`, `search` and `find` over the workspace at `root`; each runs in a thread, which
    stops when the call is cancelled or its caller stops waiting."""
    workspace = Workspace(root)

    def bind(spec: ToolSpec, body: Callable[..., str]) -> Tool:
        async def run(arguments: dict[str, Any]) -> str:
            _check_arguments(spec, arguments)
            budget = WorkBudget()
            try:
                async with asyncio.timeout(budget.seconds + STOP_GRACE_S):
                    return await asyncio.to_thread(body, workspace, budget, **arguments)
            except TimeoutError:
                raise WorkspaceError(
                    f"{spec.name} did not finish within {budget.seconds:g} s and was stopped"
                ) from None
            finally:
                budget.cancelled.set()  # the thread ends at its next look, if it still runs

        return Tool(spec=spec, run=run, idempotent=True)

    bodies = ((READ, read_file), (SEARCH, search_files), (FIND, find_files))
    return {spec.name: bind(spec, body) for spec, body in bodies}


def read_file(
    workspace: Workspace,
    budget: WorkBudget,
    path: str,
    offset: int | None = None,
    limit: int | None = None,
) -> str:
    """Lines `offset..offset+limit-1` of a text file, numbered, with a note when more follow."""
    first = _positive(offset, "offset", 1)
    count = min(_positive(limit, "limit", READ_MAX_LINES), READ_MAX_LINES)
    real = _existing_file(workspace, path)
    lines: list[str] = []
    chars = 0
    note = ""
    number = 0
    try:
        with real.open("rb") as handle:
            if is_binary(handle.read(BINARY_SNIFF_BYTES)):
                raise WorkspaceError(f"binary file, not shown: {path}")
            handle.seek(0)
            for number, raw in enumerate(_bounded_lines(handle, budget), 1):
                if number < first:
                    continue
                if len(lines) == count:
                    note = f"[more lines follow: read on with offset={number}]"
                    break
                line = f"{number}\t{_shorten(_decode(raw), LINE_MAX_CHARS, 'line cut')}"
                if chars + len(line) > READ_MAX_CHARS:
                    note = f"[cut at {READ_MAX_CHARS} characters; read on with offset={number}]"
                    break
                lines.append(line)
                chars += len(line) + 1
    except OSError as exc:
        raise WorkspaceError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except WorkStopped as stopped:
        note = f"[{stopped.reason} at line {number + 1}; read on with offset={number + 1}]"
    if not lines and not note:
        if number == 0:
            return f"({path} is empty)"
        raise WorkspaceError(f"offset {first} is past the end of {path} ({number} lines)")
    return "\n".join([*lines, note] if note else lines)


def search_files(
    workspace: Workspace,
    budget: WorkBudget,
    pattern: str,
    path: str | None = None,
    include: str | None = None,
    literal: bool = False,
    ignore_case: bool = False,
) -> str:
    """`path:line: text` for each matching line, at most SEARCH_MAX_MATCHES, in walk order (a
    directory's files before its subdirectories, each sorted by name)."""
    regex = compile_pattern(pattern, literal=literal, ignore_case=ignore_case)
    matcher = GlobMatcher(include) if include else None
    matches: list[str] = []
    oversized = searched = 0
    try:
        for walked in _search_targets(workspace, path, budget):
            if matcher is not None and not matcher.matches(walked.within):
                continue
            if _size(walked.real) > SEARCH_MAX_FILE_BYTES:
                oversized += 1
                continue
            searched += 1
            for number, text in _text_lines(walked.real, budget):
                if regex.search(text):
                    if len(matches) == SEARCH_MAX_MATCHES:
                        matches.append(
                            f"[cut at {SEARCH_MAX_MATCHES} matches; narrow the pattern, path or "
                            "include]"
                        )
                        return "\n".join(matches)
                    shown = _shorten(text, SEARCH_LINE_MAX_CHARS, "cut")
                    matches.append(f"{walked.shown}:{number}: {shown}")
    except WorkStopped as stopped:
        matches.append(f"[{stopped.reason}, {searched:,} files in; narrow the path or include]")
    if oversized:
        matches.append(f"[skipped {oversized} files larger than {SEARCH_MAX_FILE_BYTES} bytes]")
    return "\n".join(matches) if matches else f"no matches for {pattern!r} in {path or '.'}"


def find_files(
    workspace: Workspace, budget: WorkBudget, pattern: str, path: str | None = None
) -> str:
    """The files below `path` whose path matches the glob, sorted, at most FIND_MAX_PATHS
    (only those are kept while the walk goes on)."""
    matcher = GlobMatcher(pattern)
    base = workspace.resolve(path)
    if not base.exists():
        raise WorkspaceError(f"no such directory: {path}")
    if not base.is_dir():
        raise WorkspaceError(f"not a directory: {path}")
    walked = workspace.walk_files(base, budget)
    matching = (found.shown for found in walked if matcher.matches(found.within))
    kept: list[_Reversed] = []  # a heap of the smallest FIND_MAX_PATHS + 1, largest first (negated)
    note = ""
    try:
        for shown in matching:
            if len(kept) <= FIND_MAX_PATHS:
                heapq.heappush(kept, _Reversed(shown))
            elif shown < kept[0].text:
                heapq.heapreplace(kept, _Reversed(shown))
    except WorkStopped as stopped:
        note = f"[{stopped.reason}; narrow the pattern or path]"
    found = sorted(item.text for item in kept)
    if len(found) > FIND_MAX_PATHS:
        found[FIND_MAX_PATHS:] = [f"[cut at {FIND_MAX_PATHS} paths; narrow the pattern or path]"]
    if note:
        found.append(note)
    return "\n".join(found) if found else f"no files match {pattern!r} in {path or '.'}"


class _Reversed:
    """A path ordered backwards, so that heapq's smallest is the largest path kept."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __lt__(self, other: _Reversed) -> bool:
        return self.text > other.text


def _check_arguments(spec: ToolSpec, arguments: dict[str, Any]) -> None:
    """Refuse unknown, missing or mistyped arguments with the exact problem."""
    properties: dict[str, Any] = spec.parameters["properties"]
    unknown = sorted(set(arguments) - set(properties))
    if unknown:
        raise WorkspaceError(
            f"unknown argument for {spec.name}: {', '.join(unknown)} "
            f"(expected {', '.join(properties)})"
        )
    for name in spec.parameters["required"]:
        if arguments.get(name) in (None, ""):
            raise WorkspaceError(f"{spec.name} needs `{name}`")
    for name, value in arguments.items():
        expected = properties[name]["type"]
        if value is not None and not _has_type(value, expected):
            raise WorkspaceError(f"`{name}` must be {_JSON_TYPE_NAMES[expected]}, got {value!r}")


def _has_type(value: object, expected: str) -> bool:
    if expected == "string":
        return isinstance(value, str)
    if expected == "boolean":
        return isinstance(value, bool)
    if expected == "integer":
        whole_float = isinstance(value, float) and value.is_integer()
        return whole_float or (isinstance(value, int) and not isinstance(value, bool))
    raise AssertionError(f"no check for JSON type {expected}")


def _positive(value: int | None, name: str, default: int) -> int:
    if value is None:
        return default
    if value < 1:
        raise WorkspaceError(f"`{name}` must be 1 or more, got {value}")
    return int(value)


def _existing_file(workspace: Workspace, path: str) -> Path:
    real = workspace.resolve(path)
    if real.is_dir():
        raise WorkspaceError(f"not a file: {path} is a directory (list it with find)")
    if not real.exists():
        raise WorkspaceError(f"no such file or directory: {path}")
    if not real.is_file():
        raise WorkspaceError(f"not a regular file: {path}")
    return real


def _search_targets(
    workspace: Workspace, path: str | None, budget: WorkBudget
) -> Iterator[WalkedFile]:
    base = workspace.resolve(path)
    if base.is_dir():
        yield from workspace.walk_files(base, budget)
        return
    real = _existing_file(workspace, path or ".")
    try:
        with real.open("rb") as handle:
            head = handle.read(BINARY_SNIFF_BYTES)
    except OSError as exc:
        raise WorkspaceError(f"cannot read {path}: {exc.strerror or exc}") from exc
    if is_binary(head):
        raise WorkspaceError(f"binary file, not searched: {path}")
    yield WalkedFile(shown=workspace.relative(real), within=real.name, real=real)


def _text_lines(real: Path, budget: WorkBudget) -> Iterator[tuple[int, str]]:
    """Numbered lines of a text file; nothing for a binary or unreadable one."""
    try:
        with real.open("rb") as handle:
            if is_binary(handle.read(BINARY_SNIFF_BYTES)):
                return
            handle.seek(0)
            for number, raw in enumerate(handle, 1):
                if number % SPEND_EVERY_LINES == 0:
                    budget.spend()
                yield number, _decode(raw)
    except OSError:
        return


def _bounded_lines(handle: IO[bytes], budget: WorkBudget) -> Iterator[bytes]:
    """The file's lines, each at most _LINE_MAX_BYTES (the rest of a longer line is read past
    in chunks, never held), the budget looked at as they go."""
    number = 0
    while line := handle.readline(_LINE_MAX_BYTES):
        number += 1
        if number % SPEND_EVERY_LINES == 0:
            budget.spend()
        if len(line) == _LINE_MAX_BYTES and not line.endswith(b"\n"):
            while (rest := handle.readline(_SKIP_CHUNK_BYTES)) and not rest.endswith(b"\n"):
                budget.spend()
        yield line


def _size(real: Path) -> int:
    """The file's size in bytes; 0 when it vanished or cannot be stat'ed (then it reads empty)."""
    try:
        return real.stat().st_size
    except OSError:
        return 0


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace").rstrip("\r\n")


def _shorten(text: str, limit: int, what: str) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]} [{what} at {limit} characters]"
