"""A glob or a workspace from a model cannot pin a host core: globs are one RE2 expression (linear
time), so `**/` eighteen times then `zz` in a tree twelve deep answers at once while another
agent of the host keeps streaming; every workspace tool stops at its time and entry limits, and
a cancelled call stops working (it runs in a thread, which looks at a stop flag as it goes).
"""

from __future__ import annotations

import functools
import os
import threading
import time
import tracemalloc
from collections.abc import Awaitable, Iterator
from fnmatch import fnmatchcase
from pathlib import Path
from typing import TypeVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grove.actors.errors import ToolError
from grove.actors.tools.bounds import WorkBudget
from grove.actors.tools.editing import editing_tools
from grove.actors.tools.readonly import find_files, readonly_tools, search_files
from grove.actors.tools.workspace import GlobMatcher, Workspace, WorkspaceError
from grove.supervisor import Grove
from tests.integration.groves import (
    largest_gap,
    running_grove,
    sim_call,
    streaming_beside,
    tool_results,
)

T = TypeVar("T")
DEPTH = 12
PATHOLOGICAL = "**/" * 18 + "zz"
DEEP = "/".join(f"d{level}" for level in range(1, DEPTH + 1))
BIG_FILE_BYTES = 8 * 1024 * 1024  # under search's 10 MB per file
BIG_LINKS = 400  # hard links to one file: 3.2 GB to search, 8 MB on disk


def build_workspace(root: Path) -> Path:
    """Twelve directories deep, a file at each level and `zz` at the bottom; `big/` holds
    BIG_LINKS names of one file of text lines."""
    directory = root
    for level in range(1, DEPTH + 1):
        directory = directory / f"d{level}"
        directory.mkdir()
        (directory / f"file{level}.txt").write_text(f"level {level}\n")
    (directory / "zz").write_text("the bottom\n")
    big = root / "big"
    big.mkdir()
    line = b"x" * 79 + b"\n"
    (big / "text0.txt").write_bytes(line * (BIG_FILE_BYTES // len(line)))
    for number in range(1, BIG_LINKS):
        os.link(big / "text0.txt", big / f"text{number}.txt")
    return root


# ----- globs -----------------------------------------------------------------------------------


def test_the_pathological_glob_matches_at_once() -> None:
    """Under the old segment-by-segment matcher this path alone took about 86 million steps
    (the ways of spreading 12 directories over 18 `**`): it is done in a thread given 10 s,
    so a regression fails here instead of hanging the run."""
    answers: list[bool] = []
    worker = threading.Thread(
        target=lambda: answers.extend(
            GlobMatcher(PATHOLOGICAL).matches(f"{DEEP}/{name}") for name in ("zz", "zy", "zz/x")
        ),
        daemon=True,
    )
    worker.start()
    worker.join(10)
    assert answers == [True, False, False]


@functools.cache
def reference_match(pattern: tuple[str, ...], path: tuple[str, ...]) -> bool:
    """The glob semantics the tools document, segment by segment (memoised: exponential
    otherwise), as the matcher before RE2 had them."""
    if not pattern:
        return not path
    head, rest = pattern[0], pattern[1:]
    if head == "**":
        return any(reference_match(rest, path[skip:]) for skip in range(len(path) + 1))
    return bool(path) and fnmatchcase(path[0], head) and reference_match(rest, path[1:])


SEGMENT = st.text(alphabet="ab.*?[]!-^\\", min_size=1, max_size=5)
NAME = st.text(alphabet="ab.-^[]!\\", min_size=1, max_size=4)


@settings(max_examples=500, deadline=None)
@given(st.lists(SEGMENT | st.just("**"), min_size=1, max_size=5), st.lists(NAME, max_size=5))
def test_globs_match_as_the_segment_semantics_say(pattern: list[str], path: list[str]) -> None:
    glob = "/".join(pattern)
    try:
        matcher = GlobMatcher(glob)
    except WorkspaceError as refused:
        assert "cannot be matched" in str(refused)  # e.g. `[b-a]`, a range RE2 refuses
        return
    relative = "/".join(path) if path else "a"
    segments = relative.split("/") if "/" in glob.rstrip("/") else relative.split("/")[-1:]
    expected = reference_match(tuple(glob.strip("/").split("/")), tuple(segments))
    assert matcher.matches(relative) is expected


def test_a_glob_longer_than_a_pattern_may_be_is_refused() -> None:
    with pytest.raises(WorkspaceError, match="the glob is 2,001 characters long; at most 2,000"):
        GlobMatcher("a" * 2001)


# ----- every workspace tool is bounded ------------------------------------------------------


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_workspace(tmp_path_factory.mktemp("deep"))


def test_find_answers_the_pathological_glob(workspace: Path) -> None:
    found = find_files(Workspace(workspace), WorkBudget(), PATHOLOGICAL)
    assert found == f"{DEEP}/zz"


def test_search_stops_at_its_time_limit_with_what_it_found(workspace: Path) -> None:
    budget = WorkBudget(seconds=0.3)
    found = search_files(Workspace(workspace), budget, "never-there", path="big")
    assert found.startswith("[stopped after 0.3 s, the time limit, "), found
    assert found.endswith(" files in; narrow the path or include]")
    assert int(found.split(", ")[2].split()[0]) < BIG_LINKS


def test_a_walk_stops_at_its_entry_limit(workspace: Path) -> None:
    budget = WorkBudget(max_entries=50)
    found = find_files(Workspace(workspace), budget, "*.txt")
    assert found.splitlines()[-1] == (
        "[stopped after 50 directory entries, the limit; narrow the pattern or path]"
    )


async def peak_allocated(call: Awaitable[T]) -> tuple[T, int]:
    """What `call` returns, and the most memory Python held for anything meanwhile."""
    tracemalloc.start()
    try:
        result = await call
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


async def test_a_line_without_end_is_read_in_bounded_memory(tmp_path: Path) -> None:
    (tmp_path / "one-line.txt").write_bytes(b"y" * (64 * 1024 * 1024))
    read = readonly_tools(tmp_path)["read"]
    shown, peak = await peak_allocated(read.run({"path": "one-line.txt"}))
    assert shown == "1\t" + "y" * 2000 + " [line cut at 2000 characters]"
    assert peak < 8 * 1024 * 1024, peak


async def test_bash_output_is_kept_in_bounded_memory(tmp_path: Path) -> None:
    bash = editing_tools(tmp_path)["bash"]
    command = "yes grove | head -c 120000000; echo end"
    shown, peak = await peak_allocated(bash.run({"command": command}))
    assert isinstance(shown, str)
    assert shown.startswith("exit code 0\ngrove\ngrove\n")
    assert shown.endswith("grove\nend\n")
    assert "bytes cut ...]" in shown and len(shown) < 40_000
    assert peak < 16 * 1024 * 1024, peak


async def test_edit_refuses_a_file_larger_than_it_may_write(tmp_path: Path) -> None:
    (tmp_path / "huge.txt").write_bytes(b"z" * (10 * 1024 * 1024 + 1))
    edit = editing_tools(tmp_path)["edit"]
    with pytest.raises(ToolError, match=r"huge.txt is over 10,485,760 bytes"):
        await edit.run({"path": "huge.txt", "old": "z", "new": "w"})


# ----- on a host, beside a streaming agent --------------------------------------------------


@pytest.fixture(scope="module")
def grove(tmp_path_factory: pytest.TempPathFactory, workspace: Path) -> Iterator[Grove]:
    """One host: the agent that streams and the one that uses the tools share it."""
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(workspace)
        with running_grove(tmp_path_factory.mktemp("store"), hosts=1) as grove:
            yield grove


def test_the_pathological_glob_does_not_stall_a_streaming_agent(grove: Grove) -> None:
    finder = grove.create_root("gpt-5-mini", tools=["find"]).uuid
    with streaming_beside(grove) as arrivals:
        found = grove.ask(finder, sim_call("find", pattern=PATHOLOGICAL), timeout_s=60)
    assert found.ok, found.error
    assert [part["content"] for part in tool_results(grove, finder)] == [f"{DEEP}/zz"]
    assert largest_gap(arrivals) < 2.0


def cpu_seconds(pid: int) -> float:
    """User and system time the process has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_used(pid: int, seconds: float) -> float:
    before = cpu_seconds(pid)
    time.sleep(seconds)
    return cpu_seconds(pid) - before


def cpu_spent_until(pid: int, seconds: float, within_s: float) -> float:
    """CPU time the process uses from now until it has used `seconds` (or `within_s` passed):
    on a loaded machine a busy thread gets its share late, but it gets it."""
    before = cpu_seconds(pid)
    deadline = time.monotonic() + within_s
    while cpu_seconds(pid) - before < seconds and time.monotonic() < deadline:
        time.sleep(0.1)
    return cpu_seconds(pid) - before


def test_a_cancelled_search_stops_working(grove: Grove) -> None:
    (host,) = grove.host_pids().values()
    searcher = grove.create_root("gpt-5-mini", tools=["search"]).uuid
    turn = grove.send(searcher, sim_call("search", pattern="never-there", path="big"))
    for kind, _ in turn:
        if kind == "tool_call":
            break
    busy = cpu_spent_until(host, 0.5, within_s=8.0)
    assert busy >= 0.5, busy  # the search is at work: 3.2 GB would take it long
    assert grove.cancel(searcher)
    assert turn.result(60).cancelled
    after = cpu_used(host, 2.0)
    assert after < 0.25, after  # a core would show about 2.0 if the thread kept searching
