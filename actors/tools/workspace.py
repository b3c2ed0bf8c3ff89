"""`Workspace`: path confinement to one root directory, file walking and glob matching.

Every path a read-only tool touches goes through `Workspace.resolve`; nothing here writes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

from providers.errors import GroveError

BINARY_SNIFF_BYTES = 8192
SKIPPED_DIRECTORIES = frozenset({".git"})
MAX_GLOB_ALTERNATIVES = 256
_BRACES = re.compile(r"\{([^{}]*)\}")


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

    def walk_files(self, base: Path) -> Iterator[WalkedFile]:
        """Regular files under the resolved directory `base`, sorted, without `.git`.

        Directory symlinks are not followed; a file symlink is yielded only when its target is
        a file inside the root, and it is read through that resolved target.
        """
        for directory, subdirectories, files in os.walk(base):
            subdirectories[:] = sorted(d for d in subdirectories if d not in SKIPPED_DIRECTORIES)
            for name in sorted(files):
                listed = Path(directory, name)
                real = Path(os.path.realpath(listed))
                if self.contains(real) and real.is_file():
                    yield WalkedFile(
                        shown=listed.relative_to(self.real_root).as_posix(),
                        within=listed.relative_to(base).as_posix(),
                        real=real,
                    )

    def _lexically_inside(self, path: Path) -> bool:
        return any(path == root or root in path.parents for root in (self.root, self.real_root))


def is_binary(head: bytes) -> bool:
    """A file whose first bytes hold a NUL is treated as binary."""
    return b"\0" in head


class GlobMatcher:
    """A glob over `/`-separated relative paths. Without `/` it matches the last segment (like
    `find -name`), else the whole path. Each segment is an `fnmatch` pattern (`*`, `?`,
    `[abc]`, `[!abc]`, never crossing `/`); a `**` segment spans any number of directories;
    `{a,b}` gives alternatives."""

    def __init__(self, pattern: str) -> None:
        if not pattern.strip("/"):
            raise WorkspaceError(f"empty glob pattern: {pattern!r}")
        self.pattern = pattern
        self._whole_path = "/" in pattern.rstrip("/")
        self._alternatives = [
            alternative.strip("/").split("/") for alternative in _expand_braces(pattern)
        ]

    def matches(self, relative: str) -> bool:
        segments = relative.split("/") if self._whole_path else relative.split("/")[-1:]
        return any(_match_segments(pattern, segments) for pattern in self._alternatives)


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


def _match_segments(pattern: list[str], path: list[str]) -> bool:
    if not pattern:
        return not path
    head, rest = pattern[0], pattern[1:]
    if head == "**":
        return any(_match_segments(rest, path[skip:]) for skip in range(len(path) + 1))
    return bool(path) and fnmatchcase(path[0], head) and _match_segments(rest, path[1:])
