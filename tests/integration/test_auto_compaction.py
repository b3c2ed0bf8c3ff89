"""Automatic compaction: after a turn that leaves the context past `[compaction] threshold` of
the window, the agent's older history is summarised without being asked, and a reply cut off
by the output limit with the context that full is compacted and retried once; `enabled =
false` (tests/integration/test_compaction.py runs so) leaves it alone.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from grove.supervisor import Grove
from tests.integration.groves import compactions, running_grove

MODEL = "claude-haiku-4-5"  # a 200,000-token window: 0.002 of it is 400 tokens


@pytest.fixture(scope="module")
def grove(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Grove]:
    env = {"GROVE_COMPACTION__THRESHOLD": "0.002", "GROVE_COMPACTION__KEEP_RECENT_TOKENS": "100"}
    with running_grove(tmp_path_factory.mktemp("auto"), hosts=1, env=env) as grove:
        yield grove


def test_a_turn_past_the_threshold_compacts_the_history(grove: Grove) -> None:
    root = grove.create_root(MODEL).uuid
    assert grove.ask(root, "[[sim tokens=20]] a short start").ok
    assert compactions(grove, root) == []  # well under 400 tokens
    shown: list[tuple[str, str]] = []
    for n in range(3):
        turn = grove.send(root, f"[[sim tokens=60]] question {n}: " + "words " * 80)
        shown += list(turn)
        assert turn.result().ok
    # Compacted before the turn that passed the threshold ended, with a divider in its stream.
    assert ("notice", "── context compacted (threshold) ──") in shown
    (first, *_) = compactions(grove, root)
    assert first["reason"] == "threshold"
    assert int(first["tokens_after"]) < int(first["tokens_before"])
    view = grove.history(root)
    assert view[0].kind == "compaction" and view[0].data["reason"] == "threshold"
    assert grove.ask(root, "[[sim tokens=5]] still going").ok


def test_a_cut_off_reply_with_a_full_context_is_compacted_and_retried_once(grove: Grove) -> None:
    root = grove.create_root(MODEL).uuid
    for n in range(2):
        assert grove.ask(root, f"[[sim tokens=60]] part {n}: " + "words " * 80).ok
    # The turns above compacted after themselves (threshold); this prompt alone fills the
    # context past the threshold again.
    result = grove.ask(root, "[[sim stop=length tokens=8]] go on: " + "words " * 200)
    # Compacted, sent again, cut off again: the turn ends there (one retry, no loop).
    assert result.ok and result.stop_reason == "max_tokens"
    reasons = [c["reason"] for c in compactions(grove, root)]
    assert "incomplete" in reasons
