"""Tests of actors/watchdog.py: WATCHDOG.md discovery, order, `@path` imports and wrapping.

Every test builds its own tree in a temporary directory (a fake git root is a directory that
contains `.git`) and passes the config and home directories explicitly.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grove.actors.watchdog import (
    attention_block,
    discover_watchdog_files,
    expand_imports,
    expand_text,
    watchdog_prompt,
)


class Tree:
    """home/ with a git repository at home/work/repo and a Grove config dir beside home."""

    def __init__(self, base: Path) -> None:
        self.home = base / "home"
        self.config = base / "config" / "grove"
        self.repo = self.home / "work" / "repo"
        (self.repo / ".git").mkdir(parents=True)
        self.config.mkdir(parents=True)

    def write(self, path: Path, text: str) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path

    def discover(self, cwd: Path) -> list[Path]:
        cwd.mkdir(parents=True, exist_ok=True)
        return discover_watchdog_files(cwd, config_dir=self.config, home=self.home)

    def prompt(self, cwd: Path) -> str:
        cwd.mkdir(parents=True, exist_ok=True)
        return watchdog_prompt(cwd, config_dir=self.config, home=self.home)


@pytest.fixture
def tree(tmp_path: Path) -> Tree:
    return Tree(tmp_path)


# --- discovery ------------------------------------------------------------------------------


def test_user_level_then_every_project_level_from_the_git_root_down(tree: Tree) -> None:
    cwd = tree.repo / "pkg" / "sub"
    user = tree.write(tree.config / "WATCHDOG.md", "user")
    tree.write(tree.home / "WATCHDOG.md", "above the git root: not loaded")
    tree.write(tree.home / "work" / "WATCHDOG.md", "above the git root: not loaded")
    root_grove = tree.write(tree.repo / ".grove" / "WATCHDOG.md", "root .grove")
    root = tree.write(tree.repo / "WATCHDOG.md", "root")
    pkg = tree.write(tree.repo / "pkg" / "WATCHDOG.md", "pkg")
    sub_grove = tree.write(cwd / ".grove" / "WATCHDOG.md", "sub .grove")
    sub = tree.write(cwd / "WATCHDOG.md", "sub")
    tree.write(tree.repo / "pkg" / "sub" / "deeper" / "WATCHDOG.md", "below cwd: not loaded")
    tree.write(tree.repo / "sibling" / "WATCHDOG.md", "beside the path: not loaded")
    assert tree.discover(cwd) == [user, root_grove, root, pkg, sub_grove, sub]


def test_without_a_repository_the_walk_starts_at_home(tree: Tree, tmp_path: Path) -> None:
    cwd = tree.home / "notes" / "today"
    tree.write(tmp_path / "WATCHDOG.md", "above home: not loaded")
    home = tree.write(tree.home / "WATCHDOG.md", "home")
    today = tree.write(cwd / "WATCHDOG.md", "today")
    assert tree.discover(cwd) == [home, today]


def test_a_git_file_marks_a_worktree_root(tree: Tree) -> None:
    worktree = tree.repo / "nested-worktree"
    tree.write(worktree / ".git", "gitdir: ../.git/worktrees/x\n")
    tree.write(tree.repo / "WATCHDOG.md", "outer repository: not loaded")
    inner = tree.write(worktree / "WATCHDOG.md", "worktree")
    assert tree.discover(worktree / "src") == [inner]


def test_other_dot_directories_are_ignored_but_grove_is_not(tree: Tree) -> None:
    cwd = tree.repo / ".tools" / "sub"
    tree.write(tree.repo / ".omp" / "WATCHDOG.md", "another tool's directory")
    tree.write(tree.repo / ".claude" / "WATCHDOG.md", "another tool's directory")
    tree.write(tree.repo / ".tools" / "WATCHDOG.md", "inside a hidden directory")
    tools_grove = tree.write(tree.repo / ".tools" / ".grove" / "WATCHDOG.md", "tools .grove")
    sub = tree.write(cwd / "WATCHDOG.md", "sub")
    assert tree.discover(cwd) == [tools_grove, sub]


def test_the_user_file_loads_from_a_hidden_config_directory(tmp_path: Path) -> None:
    home = tmp_path / "home"
    config = home / ".grove-config"
    user = config / "WATCHDOG.md"
    config.mkdir(parents=True)
    user.write_text("user")
    (home / "project").mkdir()
    assert discover_watchdog_files(home / "project", config_dir=config, home=home) == [user]


def test_unreadable_candidates_are_skipped(tree: Tree) -> None:
    (tree.repo / "WATCHDOG.md").mkdir()
    (tree.repo / "pkg" / ".grove").mkdir(parents=True)
    (tree.repo / "pkg" / ".grove" / "WATCHDOG.md").write_bytes(b"\xff\xfe not utf-8")
    pkg = tree.write(tree.repo / "pkg" / "WATCHDOG.md", "pkg")
    assert tree.discover(tree.repo / "pkg") == [pkg]


def test_a_file_reached_twice_loads_once(tree: Tree) -> None:
    grove = tree.repo / ".grove"
    user = tree.write(grove / "WATCHDOG.md", "shared")
    paths = discover_watchdog_files(tree.repo, config_dir=grove, home=tree.home)
    assert paths == [user]


def test_nothing_found_gives_an_empty_prompt(tree: Tree) -> None:
    assert tree.discover(tree.repo / "a") == []
    assert tree.prompt(tree.repo / "a") == ""


# --- the prompt -----------------------------------------------------------------------------


def test_prompt_wraps_each_file_and_puts_the_nearest_last(tree: Tree) -> None:
    cwd = tree.repo / "pkg"
    tree.write(tree.config / "WATCHDOG.md", "Watch the durable queue.")
    tree.write(tree.repo / "WATCHDOG.md", "# Repo\n\n- No raw SQL.\n")
    tree.write(cwd / "WATCHDOG.md", "Package: see @rules.md.")
    tree.write(cwd / "rules.md", "keep handlers pure")
    assert tree.prompt(cwd) == (
        "Especially pay attention to:\n<attention>\nWatch the durable queue.\n</attention>\n\n"
        "Especially pay attention to:\n<attention>\n# Repo\n\n- No raw SQL.\n\n</attention>\n\n"
        "Especially pay attention to:\n<attention>\nPackage: see keep handlers pure.\n"
        "</attention>"
    )


def test_attention_block_text() -> None:
    assert (
        attention_block("x\ny") == "Especially pay attention to:\n<attention>\nx\ny\n</attention>"
    )


# --- imports --------------------------------------------------------------------------------


def test_relative_imports_resolve_from_the_importing_file(tmp_path: Path) -> None:
    top = tmp_path / "top.md"
    (tmp_path / "docs" / "more").mkdir(parents=True)
    (tmp_path / "docs" / "rules.md").write_text("rules then @more/detail.md")
    (tmp_path / "docs" / "more" / "detail.md").write_text("DETAIL")
    (tmp_path / "more").mkdir()
    (tmp_path / "more" / "detail.md").write_text("wrong directory")
    top.write_text("Read @docs/rules.md, then @./docs/more/detail.md\n@docs/rules.md")
    assert expand_imports(top, home=tmp_path / "home") == (
        "Read rules then DETAIL, then DETAIL\nrules then DETAIL"
    )


def test_home_and_absolute_imports(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "global.md").write_text("GLOBAL")
    absolute = tmp_path / "abs.md"
    absolute.write_text("ABSOLUTE")
    top = tmp_path / "project" / "WATCHDOG.md"
    top.parent.mkdir()
    top.write_text(f"@~/global.md and @{absolute} and @~/missing.md")
    assert expand_imports(top, home=home) == "GLOBAL and ABSOLUTE and @~/missing.md"


def test_code_spans_and_fences_stay_literal(tmp_path: Path) -> None:
    (tmp_path / "x.md").write_text("X")
    source = tmp_path / "top.md"
    text = (
        "`@x.md` and ``a ` @x.md`` stay; @x.md goes; `open @x.md\n"
        "```sh\n@x.md\n  ~~~\n@x.md\n```\n"
        "after @x.md\n"
        "~~~~\n@x.md\n~~~\n@x.md\n~~~~~\n"
        "last @x.md"
    )
    assert expand_text(text, source, home=tmp_path) == (
        "`@x.md` and ``a ` @x.md`` stay; X goes; `open X\n"
        "```sh\n@x.md\n  ~~~\n@x.md\n```\n"
        "after X\n"
        "~~~~\n@x.md\n~~~\n@x.md\n~~~~~\n"
        "last X"
    )


def test_an_unclosed_fence_runs_to_the_end(tmp_path: Path) -> None:
    (tmp_path / "x.md").write_text("X")
    text = "@x.md\n```\n@x.md\n@x.md"
    assert expand_text(text, tmp_path / "top.md", home=tmp_path) == "X\n```\n@x.md\n@x.md"


def test_cycles_are_skipped_and_shared_imports_expand_each_time(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("A< @b.md >")
    (tmp_path / "b.md").write_text("B< @a.md @b.md @c.md >")
    (tmp_path / "c.md").write_text("C")
    (tmp_path / "top.md").write_text("@a.md @c.md @top.md")
    assert expand_imports(tmp_path / "top.md", home=tmp_path) == (
        "A< B< @a.md @b.md C > > C @top.md"
    )


def test_a_cycle_through_a_symlink_is_still_a_cycle(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("A< @link.md >")
    (tmp_path / "link.md").symlink_to(tmp_path / "a.md")
    assert expand_imports(tmp_path / "a.md", home=tmp_path) == "A< @link.md >"


def test_imports_stop_after_five_hops(tmp_path: Path) -> None:
    for n in range(8):
        (tmp_path / f"f{n}.md").write_text(f"f{n} @f{n + 1}.md")
    assert expand_imports(tmp_path / "f0.md", home=tmp_path) == "f0 f1 f2 f3 f4 f5 @f6.md"


def test_what_cannot_be_imported_stays_as_written(tmp_path: Path) -> None:
    (tmp_path / "dir.md").mkdir()
    (tmp_path / "latin1.md").write_bytes(b"caf\xe9")
    (tmp_path / "x.md").write_text("X")
    text = (
        "@missing.md @dir.md @latin1.md mail me@example.com or a@x.md, @ alone, (@x.md) "
        "@x.md! tab\t@x.md"
    )
    assert expand_text(text, tmp_path / "top.md", home=tmp_path) == (
        "@missing.md @dir.md @latin1.md mail me@example.com or a@x.md, @ alone, (@x.md) X! tab\tX"
    )


@pytest.fixture(scope="module")
def empty_directory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("empty")


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet="@`~. \t\nab-_()", max_size=80))
def test_text_without_importable_files_is_unchanged(empty_directory: Path, text: str) -> None:
    assert expand_text(text, empty_directory / "top.md", home=empty_directory) == text
