"""The README's first two commands, and CI running exactly the README's test command.

A fresh machine is served by those two lines; this keeps them from drifting apart.
"""

from __future__ import annotations

import re

from tests.conformance.corpus import REPO_ROOT


def readme_commands() -> list[str]:
    text = (REPO_ROOT / "README.md").read_text()
    return re.findall(r"```bash\n(.+?)\n```", text)


def test_readme_opens_with_main_job_then_tests() -> None:
    main_job, tests = readme_commands()[:2]
    assert "grove " in main_job and "--simulate" in main_job
    assert "pytest" in tests and '".[test]"' in tests
    first_block = (REPO_ROOT / "README.md").read_text().split("```bash\n", 1)[0]
    assert first_block.strip() == "# Grove"


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    script = (REPO_ROOT / ".ci" / "run").read_text().splitlines()
    assert script[-1] == readme_commands()[1]
