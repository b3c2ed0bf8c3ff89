"""`Workspace`: path confinement to one root directory, file walking and glob matching.

Every path a read-only tool touches goes through `Workspace.resolve`; nothing here writes.
A walk spends its call's `WorkBudget`; a glob is one RE2 expression, matched in linear time.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import re2

from grove.actors.tools.bounds import WorkBudget
from grove.actors.tools.patterns import MAX_PATTERN_CHARS
from grove.providers.errors import GroveError, PatternError
from grove.providers.linear_regex import compile_re2

BINARY_SNIFF_BYTES = 8192
SKIPPED_DIRECTORIES = frozenset({".git"})
MAX_GLOB_ALTERNATIVES = 256
_BRACES = re.compile(r"\{([^{}]*)\}")
_ANY_DIRECTORIES = "(?:[^/]+/)*"  # a `**` segment: any number of directories, none included


@dataclass(frozen=True, kw_only=True, slots=True)
class WalkedFile:
    shown: str  # where the file is listed, relative to the root
    within: str  # the same, relative to the directory being walked
    real: Path  # what is read: the resolved target, inside the root


class WorkspaceError(GroveError):
    """A tool request Grove refuses or cannot serve; `str()` is the exact text the model sees."""


class Workspace:
    """A root directory; paths resolve under it or are refused, symlinks included."""

    def __init__(self, root: Path) -> None:
        self.root = Path(os.path.abspath(root))
        self.real_root = Path(os.path.realpath(root))
        if not self.real_root.is_dir():
            raise WorkspaceError(f"workspace root is not a directory: {root}")

    def resolve(self, text: str | None) -> Path:
        """The real path `text` names (relative paths from the root), or a WorkspaceError.

        Refused: `..` leading out of the root, absolute paths outside it, and paths that reach
        outside through a symlink. The returned path has every symlink resolved.
        """
        text = text or "."
        if "\0" in text:
            raise WorkspaceError(f"path contains a NUL byte: {text!r}")
        if any("\ud800" <= char <= "\udfff" for char in text):
            raise WorkspaceError(f"path is not valid Unicode text: {text!r}")
        expanded = os.path.join(self.root, text)
        lexical = Path(os.path.normpath(expanded))
        if not self._lexically_inside(lexical):
            if os.path.isabs(text):
                raise WorkspaceError(f"absolute path outside the workspace: {text}")
            raise WorkspaceError(f"path escapes the workspace: {text}")
        real = Path(os.path.realpath(expanded))
        if not self.contains(real):
            raise WorkspaceError(f"path leads outside the workspace through a symlink: {text}")
        return real

    def contains(self, real: Path) -> bool:
        """Whether a fully resolved path lies in the (resolved) root."""
        return real == self.real_root or self.real_root in real.parents

    def relative(self, real: Path) -> str:
        """How tools show a resolved path: relative to the root, with `/`."""
        if real == self.real_root:
            return "."
        return real.relative_to(self.real_root).as_posix()

    def walk_files(self, base: Path, budget: WorkBudget) -> Iterator[WalkedFile]:
        """Regular files under the resolved directory `base` without `.git`, a directory's
        files (sorted) before its subdirectories (each sorted); every entry is spent from
        `budget`, which raises WorkStopped when it runs out.

        Directory symlinks are not followed; a file symlink is yielded only when its target is
        a file inside the root, and it is read through that resolved target.
        """
        pending = [base]
        while pending:
            directory = pending.pop()
            files: list[tuple[str, bool]] = []
            subdirectories: list[str] = []
            try:
                with os.scandir(directory) as entries:
                    for entry in entries:
                        budget.spend(1)
                        if _is_directory(entry):
                            if entry.name not in SKIPPED_DIRECTORIES and not entry.is_symlink():
                                subdirectories.append(entry.name)
                        else:
                            files.append((entry.name, entry.is_symlink()))
            except OSError:
                continue  # unreadable, or gone since it was listed: as os.walk, skipped
            for name, linked in sorted(files):
                listed = directory / name
                # A walk never leaves the real root except through a symlink: only those resolve.
                real = Path(os.path.realpath(listed)) if linked else listed
                if self.contains(real) and real.is_file():
                    yield WalkedFile(
                        shown=listed.relative_to(self.real_root).as_posix(),
                        within=listed.relative_to(base).as_posix(),
                        real=real,
                    )
            pending.extend(directory / name for name in sorted(subdirectories, reverse=True))

    def _lexically_inside(self, path: Path) -> bool:
        return any(path == root or root in path.parents for root in (self.root, self.real_root))


def is_binary(head: bytes) -> bool:
    """A file whose first bytes hold a NUL is treated as binary."""
    return b"\0" in head


def _is_directory(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


class GlobMatcher:
    """A glob over `/`-separated relative paths. Without `/` it matches the last segment (like
    `find -name`), else the whole path. Each segment is an `fnmatch` pattern (`*`, `?`,
    `[abc]`, `[!abc]`, never crossing `/`); a `**` segment spans any number of directories;
    `{a,b}` gives alternatives. The whole glob is one RE2 expression: matching takes time in
    proportion to the path, however many `**` it holds."""

    def __init__(self, pattern: str) -> None:
        if not pattern.strip("/"):
            raise WorkspaceError(f"empty glob pattern: {pattern!r}")
        if len(pattern) > MAX_PATTERN_CHARS:
            raise WorkspaceError(
                f"the glob is {len(pattern):,} characters long; at most {MAX_PATTERN_CHARS:,}"
            )
        self.pattern = pattern
        self._whole_path = "/" in pattern.rstrip("/")
        alternatives = "|".join(
            _segments_expression(alternative.strip("/").split("/"))
            for alternative in _expand_braces(pattern)
        )
        try:
            self._expression = compile_re2(rf"(?s)\A(?:{alternatives})\z")
        except PatternError as exc:
            raise WorkspaceError(f"glob {pattern!r} cannot be matched: {exc}") from None

    def matches(self, relative: str) -> bool:
        """Whether `relative` (its last segment, for a glob without `/`) matches."""
        subject = relative if self._whole_path else relative.rpartition("/")[2]
        return self._expression.search(subject + "/") is not None


def _expand_braces(pattern: str) -> list[str]:
    """`a.{py,md}` -> [`a.py`, `a.md`], innermost braces first."""
    expanded = [pattern]
    while any(_BRACES.search(candidate) for candidate in expanded):
        next_round: list[str] = []
        for candidate in expanded:
            match = _BRACES.search(candidate)
            if match is None:
                next_round.append(candidate)
                continue
            head, tail = candidate[: match.start()], candidate[match.end() :]
            next_round += [head + choice + tail for choice in match.group(1).split(",")]
        if len(next_round) > MAX_GLOB_ALTERNATIVES:
            raise WorkspaceError(
                f"glob has more than {MAX_GLOB_ALTERNATIVES} alternatives: {pattern}"
            )
        expanded = next_round
    return expanded


def _segments_expression(segments: list[str]) -> str:
    """The RE2 expression of one alternative, matched against a path with `/` after it."""
    parts: list[str] = []
    for segment in segments:
        if segment == "**":
            if parts[-1:] != [_ANY_DIRECTORIES]:  # `**/**` means what `**` means
                parts.append(_ANY_DIRECTORIES)
        else:
            parts.append(_segment_expression(segment) + "/")
    return "".join(parts)


def _segment_expression(segment: str) -> str:
    """One `fnmatch` segment as RE2: `*`, `?` and `[...]` never match `/`."""
    out: list[str] = []
    index = 0
    while index < len(segment):
        char = segment[index]
        index += 1
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[" and (end := _class_end(segment, index)) >= 0:
            body = segment[index:end]
            negated = body.startswith("!")
            body = body[1:] if negated else body
            escaped = body.replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]")
            escaped = "\\^" + escaped[1:] if escaped.startswith("^") else escaped
            out.append(f"[^/{escaped}]" if negated else f"[{escaped}]")
            index = end + 1
        else:
            out.append(re2.escape(char))
    return "".join(out)


def _class_end(segment: str, start: int) -> int:
    """Where the `]` closing a class opened before `start` is, as fnmatch finds it; -1: none
    (the `[` is then a plain character)."""
    index = start
    if segment[index : index + 1] == "!":
        index += 1
    if segment[index : index + 1] == "]":
        index += 1
    end = segment.find("]", index)
    return end
