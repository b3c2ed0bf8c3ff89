"""The README's first two commands and how to run `grove` from the venv after them, CI
running exactly the README's test command, and the README's examples on current models.

A fresh machine is served by those two lines; this keeps them from drifting apart.
"""

from __future__ import annotations

import re

from grove.providers.catalog import CATALOG, MODELS
from grove.providers.lifecycle import choose_model
from grove.simulator.script import estimate_tokens
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


def test_readme_says_how_to_run_grove_from_the_venv_after_its_two_commands() -> None:
    """A new user's next question after the two commands: `grove` is not on their PATH."""
    text = (REPO_ROOT / "README.md").read_text()
    after_commands = text.split("```bash\n")[2].split("```", 1)[1]
    next_paragraphs = after_commands.split("\n## ", 1)[0]
    assert "`.venv/bin/grove`" in next_paragraphs
    assert "`source .venv/bin/activate`" in next_paragraphs


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    script = (REPO_ROOT / ".ci" / "run").read_text().splitlines()
    assert script[-1] == readme_commands()[1]


def test_the_readme_examples_use_current_models() -> None:
    """Every model id in the README's code blocks and the example tasks is one the catalog
    knows, neither retired nor deprecated nor shutting down soon on the catalog's date (the
    bench tables name what they measured)."""
    text = (REPO_ROOT / "README.md").read_text()
    blocks = "\n".join(re.findall(r"```[a-z]*\n(.+?)\n```", text, re.DOTALL))
    examples = (REPO_ROOT / "examples" / "review" / "tasks.jsonl").read_text()
    ids = set(re.findall(r"\b(?:claude|gpt|gemini)-[a-z0-9.-]*[a-z0-9]", blocks + examples))
    assert "claude-sonnet-5-5" in ids and "gpt-6-luna" in ids
    for model in sorted(ids):
        assert model in MODELS, model
        assert choose_model(model, day=CATALOG.as_of).warning is None, model
    (main_job,) = readme_commands()[:1]
    assert "--model claude-sonnet-5-5/low" in main_job


def test_the_main_jobs_review_guide_is_long_enough_to_be_cached() -> None:
    """The shared guide the main job's reviews inherit is well above the caching minimum of the
    model the README runs it on (a guide under it is never cached: the job would save nothing)."""
    main_job = readme_commands()[0]
    model = re.search(r"--model ([^/\s]+)", main_job)
    context = re.search(r"--context (\S+)", main_job)
    assert model is not None and context is not None
    guide = (REPO_ROOT / context.group(1)).read_text()
    assert estimate_tokens(guide) >= 3 * MODELS[model.group(1)].cache_min_tokens
