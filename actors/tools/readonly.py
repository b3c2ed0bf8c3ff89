"""Read-only workspace tools for reviewers: `read`, `search` and `find`, confined to one root.

Nothing here writes, runs commands or leaves the workspace (see `Workspace.resolve`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from actors.agent import Tool
from actors.tools.patterns import compile_pattern
from actors.tools.workspace import (
    BINARY_SNIFF_BYTES,
    GlobMatcher,
    WalkedFile,
    Workspace,
    WorkspaceError,
    is_binary,
)
from providers.base import ToolSpec

READ_MAX_LINES = 2000
READ_MAX_CHARS = 100_000
LINE_MAX_CHARS = 2000
SEARCH_MAX_MATCHES = 200
SEARCH_LINE_MAX_CHARS = 500
SEARCH_MAX_FILE_BYTES = 10 * 1024 * 1024
FIND_MAX_PATHS = 500
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
    """`read`, `search` and `find` over the workspace at `root`; each runs in a thread."""
    workspace = Workspace(root)

    def bind(spec: ToolSpec, body: Callable[..., str]) -> Tool:
        async def run(arguments: dict[str, Any]) -> str:
            _check_arguments(spec, arguments)
            return await asyncio.to_thread(body, workspace, **arguments)

        return Tool(spec=spec, run=run)

    bodies = ((READ, read_file), (SEARCH, search_files), (FIND, find_files))
    return {spec.name: bind(spec, body) for spec, body in bodies}


def read_file(
    workspace: Workspace, path: str, offset: int | None = None, limit: int | None = None
) -> str:
    """Lines `offset..offset+limit-1` of a text file, numbered, with a note when more follow."""
    first = _positive(offset, "offset", 1)
    count = min(_positive(limit, "limit", READ_MAX_LINES), READ_MAX_LINES)
    real = _existing_file(workspace, path)
    lines: list[str] = []
    chars = 0
    note = ""
    try:
        with real.open("rb") as handle:
            if is_binary(handle.read(BINARY_SNIFF_BYTES)):
                raise WorkspaceError(f"binary file, not shown: {path}")
            handle.seek(0)
            number = 0
            for number, raw in enumerate(handle, 1):
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
    if not lines and not note:
        if number == 0:
            return f"({path} is empty)"
        raise WorkspaceError(f"offset {first} is past the end of {path} ({number} lines)")
    return "\n".join([*lines, note] if note else lines)


def search_files(
    workspace: Workspace,
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
    oversized = 0
    for walked in _search_targets(workspace, path):
        if matcher is not None and not matcher.matches(walked.within):
            continue
        if _size(walked.real) > SEARCH_MAX_FILE_BYTES:
            oversized += 1
            continue
        for number, text in _text_lines(walked.real):
            if regex.search(text):
                if len(matches) == SEARCH_MAX_MATCHES:
                    matches.append(
                        f"[cut at {SEARCH_MAX_MATCHES} matches; narrow the pattern, path or "
                        "include]"
                    )
                    return "\n".join(matches)
                shown = _shorten(text, SEARCH_LINE_MAX_CHARS, "cut")
                matches.append(f"{walked.shown}:{number}: {shown}")
    if oversized:
        matches.append(f"[skipped {oversized} files larger than {SEARCH_MAX_FILE_BYTES} bytes]")
    return "\n".join(matches) if matches else f"no matches for {pattern!r} in {path or '.'}"


def find_files(workspace: Workspace, pattern: str, path: str | None = None) -> str:
    """The files below `path` whose path matches the glob, sorted, at most FIND_MAX_PATHS."""
    matcher = GlobMatcher(pattern)
    base = workspace.resolve(path)
    if not base.exists():
        raise WorkspaceError(f"no such directory: {path}")
    if not base.is_dir():
        raise WorkspaceError(f"not a directory: {path}")
    found = sorted(
        walked.shown for walked in workspace.walk_files(base) if matcher.matches(walked.within)
    )
    if len(found) > FIND_MAX_PATHS:
        found[FIND_MAX_PATHS:] = [f"[cut at {FIND_MAX_PATHS} paths; narrow the pattern or path]"]
    return "\n".join(found) if found else f"no files match {pattern!r} in {path or '.'}"


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


def _search_targets(workspace: Workspace, path: str | None) -> Iterator[WalkedFile]:
    base = workspace.resolve(path)
    if base.is_dir():
        yield from workspace.walk_files(base)
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


def _text_lines(real: Path) -> Iterator[tuple[int, str]]:
    """Numbered lines of a text file; nothing for a binary or unreadable one."""
    try:
        with real.open("rb") as handle:
            if is_binary(handle.read(BINARY_SNIFF_BYTES)):
                return
            handle.seek(0)
            for number, raw in enumerate(handle, 1):
                yield number, _decode(raw)
    except OSError:
        return


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
