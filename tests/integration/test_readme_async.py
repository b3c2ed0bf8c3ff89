"""The README's "Async" section, run as a reader would: its first example prints what the
section says; its second (on a running service) is run by test_async_grove.py's service test."""

from __future__ import annotations

from pathlib import Path

from tests.integration.readme import python_examples, readme_section, run_python


def test_the_example_prints_what_the_section_says(tmp_path: Path) -> None:
    local, _service = python_examples("Async")
    done = run_python(local, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "3 answers\nstreamed: True\n"
    assert "prints `3 answers` and `streamed: True`" in readme_section("Async")
