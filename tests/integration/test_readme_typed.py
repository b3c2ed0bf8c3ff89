"""The README's "Typed results" section, run as a reader would: its Python example prints what
the section says it does."""

from __future__ import annotations

from pathlib import Path

from tests.integration.readme import readme_section, run_python_example


def test_the_python_example_prints_a_typed_answer(tmp_path: Path) -> None:
    done = run_python_example("Typed results", tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Finding True"
    assert "prints `Finding True`" in readme_section("Typed results")
