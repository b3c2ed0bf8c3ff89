"""WATCHDOG.md for reviewers: discovery (user level, then project levels from the workspace root
down to the current directory), `@path` imports, and the `<attention>` blocks of the prompt.

Pure functions over the filesystem: they read, never write, and hold no state.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from grove.providers.credentials import config_dir as grove_config_dir

WATCHDOG_FILE = "WATCHDOG.md"
PROJECT_CONFIG_DIR = ".grove"
MAX_IMPORT_DEPTH = 5  # hops of `@path` imports followed below a WATCHDOG.md

# `@` at the start of a line or after a space or tab (so `user@example.com` is no import),
# followed by something path-like.
_IMPORT = re.compile(r"(?<![^ \t])@([./~\w-]\S*)")
# Sentence punctuation after a path (`see @notes.md.`) is not part of it.
_TRAILING_PUNCTUATION = re.compile(r"[.,;:!?)\]}\"']+$")
_FENCE = re.compile(r"[ \t]*(`{3,}|~{3,})")
_BACKTICKS = re.compile(r"`+")


def discover_watchdog_files(
    cwd: Path, config_dir: Path | None = None, home: Path | None = None
) -> list[Path]:
    """Every readable WATCHDOG.md for `cwd`, user level first, then from the farthest project
    level to the nearest (`.grove/WATCHDOG.md` before `WATCHDOG.md` within one directory)."""
    return [path for path, _ in _load(cwd, config_dir, home)]


def watchdog_prompt(cwd: Path, config_dir: Path | None = None, home: Path | None = None) -> str:
    """The WATCHDOG.md blocks to append to a reviewer's system prompt; "" when there are none."""
    home_dir = _home(home)
    return "\n\n".join(
        attention_block(expand_text(text, path, home=home_dir))
        for path, text in _load(cwd, config_dir, home_dir)
    )


def attention_block(content: str) -> str:
    return f"Especially pay attention to:\n<attention>\n{content}\n</attention>"


def expand_imports(path: Path, home: Path | None = None) -> str:
    """The text of `path` with its `@path` imports expanded (see `expand_text`)."""
    return expand_text(path.read_text(encoding="utf-8"), path, home=_home(home))


def expand_text(text: str, source: Path, *, home: Path) -> str:
    """Replace each `@path` in `text` (read from `source`) by that file's expanded text.

    Relative paths resolve from the importing file's directory, `~/` from `home`. Imports in
    fenced code blocks and inline code spans stay literal; so does an import that would close a
    cycle, one that cannot be read as UTF-8 text, and any beyond MAX_IMPORT_DEPTH hops.
    """
    origin = Path(os.path.abspath(source))
    return _expand(text, origin.parent, (os.path.realpath(origin),), home)


def _load(cwd: Path, config_dir: Path | None, home: Path | None) -> list[tuple[Path, str]]:
    user_file = (config_dir if config_dir is not None else grove_config_dir()) / WATCHDOG_FILE
    candidates = [Path(os.path.abspath(user_file))]
    for directory in _project_levels(Path(os.path.realpath(cwd)), _home(home)):
        level = (directory / PROJECT_CONFIG_DIR / WATCHDOG_FILE, directory / WATCHDOG_FILE)
        candidates += [candidate for candidate in level if _outside_hidden_directory(candidate)]
    loaded: list[tuple[Path, str]] = []
    seen: set[str] = set()
    for candidate in candidates:
        key = os.path.realpath(candidate)
        text = None if key in seen else _read(candidate)
        if text is not None:
            seen.add(key)
            loaded.append((candidate, text))
    return loaded


def _project_levels(cwd: Path, home: Path) -> list[Path]:
    """The directories from the workspace root (the git root, else home, else the filesystem
    root) down to `cwd`, farthest first."""
    stop = _git_root(cwd) or Path(os.path.realpath(home))
    levels = [cwd]
    while levels[-1] != stop and levels[-1].parent != levels[-1]:
        levels.append(levels[-1].parent)
    return levels[::-1]


def _git_root(start: Path) -> Path | None:
    for directory in (start, *start.parents):
        if os.path.exists(directory / ".git"):
            return directory
    return None


def _outside_hidden_directory(candidate: Path) -> bool:
    """Project candidates in other tools' dot-directories are not ours; `.grove/` is."""
    owner = candidate.parent
    return owner.name == PROJECT_CONFIG_DIR or not owner.name.startswith(".")


def _home(home: Path | None) -> Path:
    return home if home is not None else Path.home()


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _expand(text: str, base: Path, chain: tuple[str, ...], home: Path) -> str:
    """`chain` holds the real paths of the file being expanded and of all that import it."""
    if len(chain) > MAX_IMPORT_DEPTH:
        return text
    lines = text.split("\n")
    fence: tuple[str, int] | None = None
    for index, line in enumerate(lines):
        marker = _fence_marker(line)
        if fence is not None:
            if marker is not None and marker[0] == fence[0] and marker[1] >= fence[1]:
                fence = None
        elif marker is not None:
            fence = marker
        else:
            lines[index] = _expand_line(line, base, chain, home)
    return "\n".join(lines)


def _expand_line(line: str, base: Path, chain: tuple[str, ...], home: Path) -> str:
    if "@" not in line:
        return line
    code = _code_spans(line)
    pieces: list[str] = []
    cursor = 0
    for match in _IMPORT.finditer(line):
        at = match.start()
        if any(start <= at < end for start, end in code):
            continue
        token = _TRAILING_PUNCTUATION.sub("", match.group(1))
        if not token:
            continue
        imported = _import(token, base, chain, home)
        if imported is not None:
            pieces += [line[cursor:at], imported]
            cursor = at + 1 + len(token)
    pieces.append(line[cursor:])
    return "".join(pieces)


def _import(token: str, base: Path, chain: tuple[str, ...], home: Path) -> str | None:
    if token == "~":
        target = home
    elif token.startswith("~/"):
        target = home / token[2:]
    else:
        target = base / token  # an absolute token replaces `base`
    target = Path(os.path.abspath(target))
    key = os.path.realpath(target)
    if key in chain:
        return None
    text = _read(target)
    if text is None:
        return None
    return _expand(text, target.parent, (*chain, key), home)


def _fence_marker(line: str) -> tuple[str, int] | None:
    """(`` ` `` or `~`, length) when the line opens or closes a fenced code block."""
    match = _FENCE.match(line)
    return (match.group(1)[0], len(match.group(1))) if match else None


def _code_spans(line: str) -> list[tuple[int, int]]:
    """[start, end) of each inline code span: a backtick run closed by the next run of the
    same length (an unmatched run is literal text)."""
    runs = [(match.start(), match.end()) for match in _BACKTICKS.finditer(line)]
    spans: list[tuple[int, int]] = []
    index = 0
    while index < len(runs):
        start, end = runs[index]
        closing = next(
            (
                later
                for later in range(index + 1, len(runs))
                if runs[later][1] - runs[later][0] == end - start
            ),
            None,
        )
        if closing is None:
            index += 1
            continue
        spans.append((start, runs[closing][1]))
        index = closing + 1
    return spans
