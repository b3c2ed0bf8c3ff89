"""A regular expression from a model cannot freeze a host: patterns run on RE2 (linear time), so
`(A+)+B`, which backtracks for ever under Python's `re`, answers at once, and the other agents
of the host keep streaming meanwhile.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from grove.actors.tools.patterns import MAX_PATTERN_CHARS, compile_pattern
from grove.actors.tools.readonly import readonly_tools
from grove.providers.errors import PatternError
from grove.supervisor import Grove
from tests.integration.groves import largest_gap, running_grove, streaming_beside

CATASTROPHIC = "(A+)+B"
# Under `re` this line costs about 2**64 steps against CATASTROPHIC: it never finishes.
TRAP_LINE = "A" * 64


def test_a_catastrophic_pattern_finishes_on_a_long_line() -> None:
    assert compile_pattern(CATASTROPHIC).search("A" * 200_000) is None
    assert compile_pattern(CATASTROPHIC).search("AAAB") is not None


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        (r"(a)\1", "invalid escape sequence"),
        ("(?=a)", "invalid perl operator"),
        ("(?<!a)b", "invalid perl operator"),
        ("a{1000}{1000}", "bad repetition operator"),
        ("x" * (MAX_PATTERN_CHARS + 1), f"at most {MAX_PATTERN_CHARS:,}"),
    ],
)
def test_patterns_re2_cannot_run_are_refused_with_the_reason(pattern: str, reason: str) -> None:
    with pytest.raises(PatternError) as caught:
        compile_pattern(pattern)
    assert reason in str(caught.value)


async def test_the_search_tool_answers_a_catastrophic_pattern_at_once(tmp_path: Path) -> None:
    (tmp_path / "trap.txt").write_text((TRAP_LINE + "\n") * 100)
    search = readonly_tools(tmp_path)["search"]
    assert await search.run({"pattern": CATASTROPHIC}) == "no matches for '(A+)+B' in ."


@pytest.fixture(scope="module")
def grove(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Grove]:
    """One host, so the reviewer that searches and the agent that streams share it."""
    workspace = tmp_path_factory.mktemp("workspace")
    (workspace / "trap.txt").write_text(TRAP_LINE + "\n")
    env = {"GROVE_ADVISOR__MODEL": "claude-haiku-4-5"}
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(workspace)
        with running_grove(tmp_path_factory.mktemp("store"), hosts=1, env=env) as grove:
            yield grove


def test_a_reviewer_searching_with_a_catastrophic_pattern_does_not_stall_its_host(
    grove: Grove,
) -> None:
    watched = grove.create_root("gpt-5-mini").uuid
    assert grove.dispatch(watched, "/advisor on").ok
    with streaming_beside(grove) as arrivals:
        args = json.dumps({"pattern": CATASTROPHIC})
        searched = grove.ask(watched, f"[[sim@reviewer tool=search args='{args}' step=1]] look")
        assert searched.ok, searched.error
        assert grove.wait_reviews(watched, 60) == 0
    dump = grove.dispatch(watched, "/advisor dump raw").text
    assert "no matches for '(A+)+B' in ." in dump
    assert largest_gap(arrivals) < 2.0  # the stream never stalled while the reviewer searched
