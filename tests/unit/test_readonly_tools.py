"""Tests of actors/tools/readonly.py and workspace.py: the reviewers' `read`, `search`, `find`.

Each test builds a workspace in a temporary directory next to a planted secret outside it; no
output or error may ever carry that secret.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grove.actors.agent.tool import Tool
from grove.actors.tools.bounds import WorkBudget
from grove.actors.tools.readonly import (
    FIND_MAX_PATHS,
    LINE_MAX_CHARS,
    READ_MAX_CHARS,
    READ_MAX_LINES,
    READONLY_TOOL_NAMES,
    SEARCH_MAX_FILE_BYTES,
    SEARCH_MAX_MATCHES,
    read_file,
    readonly_tools,
)
from grove.actors.tools.workspace import GlobMatcher, Workspace, WorkspaceError
from grove.providers.errors import GroveError

SECRET = "canary-outside-9d41e7"
ESCAPES = "path escapes the workspace: {}"
ABSOLUTE = "absolute path outside the workspace: {}"
THROUGH_LINK = "path leads outside the workspace through a symlink: {}"


def build_tree(base: Path) -> Path:
    """`base/outside` holds the secret; `base/root` is the workspace. Returns the root."""
    outside = base / "outside"
    (outside / "deeper").mkdir(parents=True)
    (outside / "secret.txt").write_text(f"{SECRET}\n")
    (outside / "deeper" / "secret.py").write_text(f"token = '{SECRET}'\n")
    root = base / "root"
    files = {
        "src/app.py": "import os\n\ndef main():\n    return os.getcwd()\n",
        "src/util.py": "def helper(x):\n    return a.b(x)\n",
        "src/nested/deep.py": "def deep():\n    pass\n",
        "docs/guide.md": "# Guide\nCall main() first.\nMAIN is loud.\n",
        "docs/sub/notes.md": "notes with main\n",
        "README.txt": "top level main\n",
        ".git/config": "[core] main = yes\n",
    }
    for relative, content in files.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(content)
    (root / "blob.bin").write_bytes(b"main\x00\x01\x02 main")
    (root / "leak").symlink_to(outside / "secret.txt")
    (root / "leakdir").symlink_to(outside, target_is_directory=True)
    (root / "relative-leak").symlink_to(Path("..") / "outside" / "secret.txt")
    (root / "alias.py").symlink_to(Path("src") / "app.py")
    (root / "srclink").symlink_to(Path("src"), target_is_directory=True)
    return root


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return build_tree(tmp_path)


@pytest.fixture
def tools(root: Path) -> dict[str, Tool]:
    return readonly_tools(root)


async def call(tools: dict[str, Tool], name: str, **arguments: Any) -> str:
    output = await tools[name].run(arguments)
    assert isinstance(output, str) and SECRET not in output
    return output


async def refusal(tools: dict[str, Tool], name: str, **arguments: Any) -> str:
    with pytest.raises(GroveError) as caught:  # WorkspaceError, PatternError
        await tools[name].run(arguments)
    text = str(caught.value)
    assert SECRET not in text
    return text


# --- confinement ----------------------------------------------------------------------------

ARGUMENTS: dict[str, dict[str, Any]] = {
    "read": {},
    "search": {"pattern": "canary"},
    "find": {"pattern": "*"},
}


def escaping_paths(root: Path) -> list[tuple[str, str]]:
    outside = root.parent / "outside"
    return [
        ("../outside/secret.txt", ESCAPES),
        ("../outside", ESCAPES),
        ("..", ESCAPES),
        ("src/../../outside/secret.txt", ESCAPES),
        ("srclink/../../outside", ESCAPES),
        (str(outside / "secret.txt"), ABSOLUTE),
        (str(outside), ABSOLUTE),
        ("/etc/passwd", ABSOLUTE),
        (f"{root}/../outside/secret.txt", ABSOLUTE),
        ("leak", THROUGH_LINK),
        ("relative-leak", THROUGH_LINK),
        ("leakdir", THROUGH_LINK),
        ("leakdir/secret.txt", THROUGH_LINK),
        ("leakdir/deeper", THROUGH_LINK),
    ]


@pytest.mark.parametrize("name", READONLY_TOOL_NAMES)
async def test_every_tool_refuses_every_way_out(name: str, root: Path) -> None:
    tools = readonly_tools(root)
    for path, template in escaping_paths(root):
        text = await refusal(tools, name, path=path, **ARGUMENTS[name])
        assert text == template.format(path)


async def test_whole_workspace_search_and_find_never_reach_the_secret(
    tools: dict[str, Tool],
) -> None:
    assert await call(tools, "search", pattern="9d41e7") == "no matches for '9d41e7' in ."
    assert await call(tools, "search", pattern="canary", literal=True, include="*") == (
        "no matches for 'canary' in ."
    )
    listed = (await call(tools, "find", pattern="**")).splitlines()
    assert listed == [
        "README.txt",
        "alias.py",
        "blob.bin",
        "docs/guide.md",
        "docs/sub/notes.md",
        "src/app.py",
        "src/nested/deep.py",
        "src/util.py",
    ]
    assert await call(tools, "find", pattern="secret*") == "no files match 'secret*' in ."


async def test_paths_that_stay_inside_are_served(root: Path, tools: dict[str, Tool]) -> None:
    app = "1\timport os\n2\t\n3\tdef main():\n4\t    return os.getcwd()"
    assert await call(tools, "read", path="src/app.py") == app
    assert await call(tools, "read", path="alias.py") == app
    assert await call(tools, "read", path="srclink/app.py") == app
    assert await call(tools, "read", path="./docs/../src/app.py") == app
    assert await call(tools, "read", path=str(root / "src" / "app.py")) == app
    assert await call(tools, "find", pattern="*.py", path="srclink") == "\n".join(
        ["src/app.py", "src/nested/deep.py", "src/util.py"]
    )


async def test_a_root_reached_through_a_symlink_accepts_both_spellings(tmp_path: Path) -> None:
    real_root = build_tree(tmp_path)
    linked_root = tmp_path / "linked-root"
    linked_root.symlink_to(real_root, target_is_directory=True)
    tools = readonly_tools(linked_root)
    for spelling in (linked_root, real_root):
        output = await call(tools, "read", path=str(spelling / "README.txt"))
        assert output == "1\ttop level main"
    assert await refusal(tools, "read", path="../outside/secret.txt") == ESCAPES.format(
        "../outside/secret.txt"
    )


@pytest.fixture(scope="module")
def shared_workspace(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    return Workspace(build_tree(tmp_path_factory.mktemp("fuzz")))


SEGMENTS = st.sampled_from(
    [
        "..",
        ".",
        "",
        "src",
        "nested",
        "leak",
        "leakdir",
        "relative-leak",
        "srclink",
        "alias.py",
        "app.py",
        "outside",
        "secret.txt",
        "root",
        "deeper",
        "nope",
    ]
)


@settings(max_examples=400, deadline=None)
@given(segments=st.lists(SEGMENTS, max_size=8), absolute=st.booleans())
def test_no_path_resolves_outside_the_root(
    shared_workspace: Workspace, segments: list[str], absolute: bool
) -> None:
    text = "/".join(segments)
    if absolute:
        text = f"{shared_workspace.root}/{text}"
    try:
        resolved = shared_workspace.resolve(text)
    except WorkspaceError as refused:
        assert str(refused) in {t.format(text) for t in (ESCAPES, ABSOLUTE, THROUGH_LINK)}
        return
    assert shared_workspace.contains(resolved)
    assert resolved.resolve() == resolved


@settings(max_examples=300, deadline=None)
@given(text=st.text(st.characters(codec=None, exclude_categories=()), max_size=40))
def test_reading_arbitrary_text_paths_never_shows_the_secret(
    shared_workspace: Workspace, text: str
) -> None:
    try:
        output = read_file(shared_workspace, WorkBudget(), text)
    except WorkspaceError as refused:
        assert SECRET not in str(refused)
    else:
        assert SECRET not in output


# --- read -----------------------------------------------------------------------------------


async def test_read_windows_with_offset_and_limit(root: Path, tools: dict[str, Tool]) -> None:
    (root / "long.txt").write_text("".join(f"line {n}\n" for n in range(1, 2501)))
    first = (await call(tools, "read", path="long.txt")).splitlines()
    assert len(first) == READ_MAX_LINES + 1
    assert first[0] == "1\tline 1"
    assert first[READ_MAX_LINES - 1] == f"{READ_MAX_LINES}\tline {READ_MAX_LINES}"
    assert first[-1] == f"[more lines follow: read on with offset={READ_MAX_LINES + 1}]"
    rest = (await call(tools, "read", path="long.txt", offset=READ_MAX_LINES + 1)).splitlines()
    assert rest[0] == "2001\tline 2001"
    assert rest[-1] == "2500\tline 2500"
    window = await call(tools, "read", path="long.txt", offset=5, limit=3)
    assert window == "5\tline 5\n6\tline 6\n7\tline 7\n[more lines follow: read on with offset=8]"
    assert await call(tools, "read", path="long.txt", offset=2499, limit=2) == (
        "2499\tline 2499\n2500\tline 2500"
    )
    capped = await call(tools, "read", path="long.txt", limit=5000)
    assert len(capped.splitlines()) == READ_MAX_LINES + 1


async def test_read_cuts_at_the_size_cap_and_says_where_to_go_on(
    root: Path, tools: dict[str, Tool]
) -> None:
    (root / "wide.txt").write_text("".join(f"{n:04d}" + "x" * 996 + "\n" for n in range(300)))
    lines = (await call(tools, "read", path="wide.txt")).splitlines()
    shown = len(lines) - 1
    assert sum(len(line) + 1 for line in lines[:-1]) <= READ_MAX_CHARS
    assert 90 <= shown < 300
    assert lines[-1] == f"[cut at {READ_MAX_CHARS} characters; read on with offset={shown + 1}]"
    assert lines[-2].startswith(f"{shown}\t{shown - 1:04d}x")


async def test_read_cuts_a_very_long_line(root: Path, tools: dict[str, Tool]) -> None:
    (root / "one.txt").write_text("y" * (LINE_MAX_CHARS + 10) + "\nshort\n")
    output = await call(tools, "read", path="one.txt")
    expected_first = "1\t" + "y" * LINE_MAX_CHARS + f" [line cut at {LINE_MAX_CHARS} characters]"
    assert output == f"{expected_first}\n2\tshort"


async def test_read_refusals_are_precise(root: Path, tools: dict[str, Tool]) -> None:
    (root / "empty.txt").write_text("")
    (root / "crlf.txt").write_bytes(b"one\r\ntwo\r\n")
    assert await call(tools, "read", path="empty.txt") == "(empty.txt is empty)"
    assert await call(tools, "read", path="crlf.txt") == "1\tone\n2\ttwo"
    assert await refusal(tools, "read", path="blob.bin") == "binary file, not shown: blob.bin"
    assert await refusal(tools, "read", path="src") == (
        "not a file: src is a directory (list it with find)"
    )
    assert await refusal(tools, "read", path="nope.txt") == "no such file or directory: nope.txt"
    assert await refusal(tools, "read", path="README.txt", offset=3) == (
        "offset 3 is past the end of README.txt (1 lines)"
    )
    assert await refusal(tools, "read", path="README.txt", offset=0) == (
        "`offset` must be 1 or more, got 0"
    )
    assert await refusal(tools, "read", path="README.txt", limit="5") == (
        "`limit` must be an integer, got '5'"
    )
    assert await refusal(tools, "read") == "read needs `path`"
    assert await refusal(tools, "read", path="README.txt", lines=3) == (
        "unknown argument for read: lines (expected path, offset, limit)"
    )
    assert await refusal(tools, "read", path="a\0b") == "path contains a NUL byte: 'a\\x00b'"
    assert await refusal(tools, "read", path="a\udc80") == (
        "path is not valid Unicode text: 'a\\udc80'"
    )


async def test_read_accepts_whole_number_floats(tools: dict[str, Tool]) -> None:
    output = await call(tools, "read", path="docs/guide.md", offset=2.0, limit=1.0)
    assert output == "2\tCall main() first.\n[more lines follow: read on with offset=3]"


# --- search ---------------------------------------------------------------------------------


async def test_search_regex_over_the_workspace(tools: dict[str, Tool]) -> None:
    output = await call(tools, "search", pattern=r"def \w+\(")
    assert output.splitlines() == [
        "alias.py:3: def main():",
        "src/app.py:3: def main():",
        "src/util.py:1: def helper(x):",
        "src/nested/deep.py:1: def deep():",
    ]


async def test_search_skips_binary_files_and_git(tools: dict[str, Tool]) -> None:
    output = await call(tools, "search", pattern="main")
    assert output.splitlines() == [
        "README.txt:1: top level main",
        "alias.py:3: def main():",
        "docs/guide.md:2: Call main() first.",
        "docs/sub/notes.md:1: notes with main",
        "src/app.py:3: def main():",
    ]
    assert await refusal(tools, "search", pattern="main", path="blob.bin") == (
        "binary file, not searched: blob.bin"
    )


async def test_search_literal_ignore_case_include_and_path(tools: dict[str, Tool]) -> None:
    assert await call(tools, "search", pattern="a.b(", literal=True) == (
        "src/util.py:2:     return a.b(x)"
    )
    invalid = await refusal(tools, "search", pattern="a.b(")
    assert invalid.startswith("invalid regular expression 'a.b(': missing ): a.b(")
    assert invalid.endswith("lookaround; pass literal=true to search for the text as it is)")
    assert await call(tools, "search", pattern="^main", ignore_case=True, path="docs") == (
        "docs/guide.md:3: MAIN is loud."
    )
    assert await call(tools, "search", pattern="main", include="*.md") == (
        "docs/guide.md:2: Call main() first.\ndocs/sub/notes.md:1: notes with main"
    )
    assert await call(tools, "search", pattern="main", path="docs", include="sub/*.md") == (
        "docs/sub/notes.md:1: notes with main"
    )
    assert await call(tools, "search", pattern="def", path="src/util.py") == (
        "src/util.py:1: def helper(x):"
    )
    assert await call(tools, "search", pattern="zebra", path="src") == (
        "no matches for 'zebra' in src"
    )
    assert await refusal(tools, "search", pattern="x", path="gone") == (
        "no such file or directory: gone"
    )


async def test_search_caps_matches_with_a_note(root: Path, tools: dict[str, Tool]) -> None:
    (root / "many.log").write_text("hit\n" * (SEARCH_MAX_MATCHES + 50))
    lines = (await call(tools, "search", pattern="hit")).splitlines()
    assert len(lines) == SEARCH_MAX_MATCHES + 1
    assert lines[0] == "many.log:1: hit"
    assert lines[-2] == f"many.log:{SEARCH_MAX_MATCHES}: hit"
    assert lines[-1] == (
        f"[cut at {SEARCH_MAX_MATCHES} matches; narrow the pattern, path or include]"
    )


async def test_search_skips_oversized_files_and_says_so(root: Path, tools: dict[str, Tool]) -> None:
    line = b"needle " + b"x" * 1017 + b"\n"
    (root / "huge.log").write_bytes(line * (SEARCH_MAX_FILE_BYTES // len(line) + 1))
    (root / "small.log").write_bytes(line)
    output = await call(tools, "search", pattern="needle", include="*.log")
    assert output == (
        f"small.log:1: needle {'x' * 493} [cut at 500 characters]\n"
        f"[skipped 1 files larger than {SEARCH_MAX_FILE_BYTES} bytes]"
    )


# --- find -----------------------------------------------------------------------------------


async def test_find_globs(tools: dict[str, Tool]) -> None:
    assert (await call(tools, "find", pattern="*.py")).splitlines() == [
        "alias.py",
        "src/app.py",
        "src/nested/deep.py",
        "src/util.py",
    ]
    assert await call(tools, "find", pattern="src/*.py") == "src/app.py\nsrc/util.py"
    assert await call(tools, "find", pattern="src/**/*.py") == (
        "src/app.py\nsrc/nested/deep.py\nsrc/util.py"
    )
    assert await call(tools, "find", pattern="*.{md,txt}", path="docs") == (
        "docs/guide.md\ndocs/sub/notes.md"
    )
    assert await call(tools, "find", pattern="[!a]*.py", path="src") == (
        "src/nested/deep.py\nsrc/util.py"
    )
    assert await call(tools, "find", pattern="nested/????.py", path="src") == ("src/nested/deep.py")
    assert await call(tools, "find", pattern="config") == "no files match 'config' in ."
    assert await refusal(tools, "find", pattern="*", path="README.txt") == (
        "not a directory: README.txt"
    )
    assert await refusal(tools, "find", pattern="*", path="gone") == "no such directory: gone"
    assert await refusal(tools, "find", pattern="/") == "empty glob pattern: '/'"


async def test_find_caps_paths_with_a_note(root: Path, tools: dict[str, Tool]) -> None:
    many = root / "many"
    many.mkdir()
    for n in range(FIND_MAX_PATHS + 20):
        (many / f"f{n:04d}.dat").write_text("")
    lines = (await call(tools, "find", pattern="*.dat")).splitlines()
    assert len(lines) == FIND_MAX_PATHS + 1
    assert lines[0] == "many/f0000.dat"
    assert lines[-2] == f"many/f{FIND_MAX_PATHS - 1:04d}.dat"
    assert lines[-1] == f"[cut at {FIND_MAX_PATHS} paths; narrow the pattern or path]"


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("*.py", "a/b/c.py", True),
        ("*.py", "a/b/c.pyc", False),
        ("a/*.py", "a/c.py", True),
        ("a/*.py", "a/b/c.py", False),
        ("a/**/*.py", "a/c.py", True),
        ("a/**/*.py", "a/b/d/c.py", True),
        ("**/c.py", "c.py", True),
        ("a/**", "a/b/c", True),
        ("{a,b}/x.{md,txt}", "b/x.txt", True),
        ("{a,b}/x.{md,txt}", "c/x.txt", False),
        ("x{1,{2,3}}", "x3", True),
        ("[ab]?.md", "bz.md", True),
        ("[ab]?.md", "cz.md", False),
        ("/a/*.md", "a/x.md", True),
        ("/a/*.md", "b/a/x.md", False),
    ],
)
def test_glob_matcher(pattern: str, path: str, expected: bool) -> None:
    assert GlobMatcher(pattern).matches(path) is expected


def test_a_glob_with_too_many_alternatives_is_refused() -> None:
    pattern = "{a,b}" * 9
    with pytest.raises(WorkspaceError) as caught:
        GlobMatcher(pattern)
    assert str(caught.value) == f"glob has more than 256 alternatives: {pattern}"


# --- the tool specs -------------------------------------------------------------------------


def test_specs_name_and_describe_every_parameter(tools: dict[str, Tool]) -> None:
    assert tuple(tools) == READONLY_TOOL_NAMES
    required = {"read": ["path"], "search": ["pattern"], "find": ["pattern"]}
    for name, tool in tools.items():
        assert tool.spec.name == name
        assert len(tool.spec.description) > 40
        schema = tool.spec.parameters
        assert schema["type"] == "object"
        assert schema["required"] == required[name]
        assert schema["additionalProperties"] is False
        for parameter in schema["properties"].values():
            assert parameter["type"] in {"string", "integer", "boolean"}
            assert len(parameter["description"]) > 15
