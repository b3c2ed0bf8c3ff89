"""Advisor settings over Ray and the simulator: several named reviewers on one agent, reviewers
for forked children (`advisor.subagents`), and `sync_backlog` holding the next turn back.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from grove.supervisor import Grove
from tests.integration.groves import running_grove

REVIEWERS = [
    {"name": "security", "model": "claude-haiku-4-5", "prompt": "Watch for injection."},
    {"name": "style", "model": "gpt-5-nano"},
]


@pytest.fixture(scope="module")
def grove(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Grove]:
    env = {
        "GROVE_ADVISOR__ENABLED": "true",
        "GROVE_ADVISOR__SUBAGENTS": "true",
        "GROVE_ADVISOR__SYNC_BACKLOG": "1",
        "GROVE_ADVISOR__REVIEWERS": json.dumps(REVIEWERS),
    }
    with running_grove(tmp_path_factory.mktemp("advisor-settings"), env=env) as grove:
        assert grove.settings.advisor.sync_backlog == 1
        yield grove


def advise(model: str, note: str) -> str:
    args = json.dumps({"note": note})
    return f"[[sim@reviewer model={model} tool=advise args='{args}']]"


def test_two_reviewers_both_deliver_each_by_name(grove: Grove) -> None:
    root = grove.create_root("gemini-3.0-flash").uuid
    prompt = advise("claude-haiku-4-5", "escape the query") + advise("gpt-5-nano", "shorter names")
    assert grove.ask(root, prompt + " write the handler").ok
    assert grove.wait_reviews(root, 30) == 0
    cards = {card.data["reviewer"]: card.content for card in grove.advice(root)}
    assert cards.keys() == {"security", "style"}
    assert cards["security"].endswith("Reviewer: security\n- [nit] escape the query")
    assert cards["style"].endswith("Reviewer: style\n- [nit] shorter names")
    status = grove.dispatch(root, "/advisor status").text
    assert "security  claude-haiku-4-5" in status and "style  gpt-5-nano" in status


def test_forked_children_get_their_own_reviewers(grove: Grove) -> None:
    root = grove.create_root("gpt-5-mini").uuid
    child = grove.dispatch(root, '/fork "look around"').data["child"]
    grove.wait_turn(child, 30)
    assert grove.wait_reviews(child, 30) == 0
    names = {row["name"] for row in grove.dispatch(root, "/advisor status").data["reviewers"]}
    assert names == {"security", "style"}  # /fork moved the focus to the child


def test_sync_backlog_holds_the_next_turn_until_reviewers_catch_up(grove: Grove) -> None:
    root = grove.create_root("gpt-5-mini").uuid
    slow = "[[sim@reviewer ttft_ms=3000]]"
    assert grove.ask(root, slow + " first").ok
    started = time.monotonic()
    assert grove.ask(root, "second").ok
    held = time.monotonic() - started
    assert 2.0 <= held < 30.0  # waited for the reviewers, never past the 30 s cap
