"""`Workspace`: path confinement to one root directory, file walking and glob matching.

Every path a read-only tool touches goes through `Workspace.resolve`; nothing here writes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from providers.errors import GroveError

BINARY_SNIFF_BYTES = 8192
SKIPPED_DIRECTORIES = frozenset({".git"})


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


def compile_glob(pattern: str) -> re.Pattern[str]:
    """A glob as a regex over `/`-separated relative paths.

    `*` and `?` stay within one path segment, `**` spans segments (`**/` also matches no
    directory), `[abc]`/`[!abc]` are classes, `{a,b}` alternatives (not nested).
    """
    out: list[str] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif char == "*":
            out.append("[^/]*")
            i += 1
        elif char == "?":
            out.append("[^/]")
            i += 1
        elif char == "[" and (end := _class_end(pattern, i)) > 0:
            body = pattern[i + 1 : end]
            if body.startswith("!"):
                body = "^" + body[1:]
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = end + 1
        elif char == "{" and (end := pattern.find("}", i)) > 0:
            choices = pattern[i + 1 : end].split(",")
            out.append("(?:" + "|".join(_literal_glob(choice) for choice in choices) + ")")
            i = end + 1
        else:
            out.append(re.escape(char))
            i += 1
    return re.compile("".join(out) + r"\Z", re.DOTALL)


class GlobMatcher:
    """Matches a relative path: against its last segment when the pattern has no `/` (like
    `find -name`), else against the whole path."""

    def __init__(self, pattern: str) -> None:
        if not pattern:
            raise WorkspaceError("empty glob pattern")
        self.pattern = pattern
        self._whole_path = "/" in pattern.rstrip("/")
        self._regex = compile_glob(pattern.strip("/") if self._whole_path else pattern)

    def matches(self, relative: str) -> bool:
        subject = relative if self._whole_path else relative.rsplit("/", 1)[-1]
        return self._regex.match(subject) is not None


def _class_end(pattern: str, start: int) -> int:
    """Index of the `]` closing the class opened at `start`, or -1 when there is none."""
    i = start + 1
    if i < len(pattern) and pattern[i] == "!":
        i += 1
    if i < len(pattern) and pattern[i] == "]":
        i += 1
    end = pattern.find("]", i)
    return end if end > 0 and "/" not in pattern[start:end] else -1


def _literal_glob(choice: str) -> str:
    compiled = compile_glob(choice).pattern
    return compiled.removesuffix(r"\Z")
