"""Advisor reviewers end to end over Ray and the simulator: what a reviewer sees, coalescing,
failures, delivery of nits, concerns and blockers, deduplication, /clear and mid-session on.
Reviewers are scripted by `[[sim@reviewer ...]]` directives in the watched agent's prompts.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from grove.supervisor import Grove
from grove.supervisor.store.records import MessageRecord
from tests.integration.groves import running_grove

CARD_PREFIX = "Advisor (a senior reviewer watching your work — weigh it, don't blindly obey):"


@pytest.fixture(scope="module")
def grove(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Grove]:
    # A failed review is tried again after 0.1 s, not 1 s (three such waits in this module).
    env = {"GROVE_ADVISOR__MODEL": "claude-haiku-4-5", "GROVE_ADVISOR__RETRY_DELAY_S": "0.1"}
    with running_grove(tmp_path_factory.mktemp("advisor"), env=env) as grove:
        yield grove


def advise(note: str, severity: str = "nit", **extra: str) -> str:
    args = json.dumps({"note": note, "severity": severity})
    options = "".join(f" {key}={value}" for key, value in extra.items())
    return f"[[sim@reviewer tool=advise args='{args}'{options}]]"


def watched(grove: Grove, model: str = "gpt-6.1-terra") -> str:
    root = grove.create_root(model).uuid
    outcome = grove.dispatch(root, "/advisor on")
    assert outcome.ok, outcome.text
    return root


def reviewer_status(grove: Grove, root: str) -> dict[str, Any]:
    (row,) = grove.dispatch(root, "/advisor status").data["reviewers"]
    assert isinstance(row, dict)
    return row


def reviewer_prompts(grove: Grove, root: str) -> list[str]:
    dump = grove.dispatch(root, "/advisor dump").text
    return [p for p in dump.split("[user] New activity in the session you are watching:")[1:]]


def kinds_after(history: list[MessageRecord], content: str) -> list[str]:
    index = next(i for i, m in enumerate(history) if m.content == content)
    return [m.kind for m in history[index + 1 :]]


def test_reviewer_sees_each_turn_once_with_thinking_never_its_own_cards(grove: Grove) -> None:
    root = watched(grove, "claude-haiku-4-5/low")  # a model whose stream shows its thinking
    first = '[[sim thinking="mulling the plan"]] ' + advise("check the bounds") + " write it"
    assert grove.ask(root, first).ok
    assert grove.wait_reviews(root, 30) == 0
    assert grove.ask(root, "second step please").ok
    assert grove.wait_reviews(root, 30) == 0
    prompts = reviewer_prompts(grove, root)
    assert len(prompts) == 2
    assert "**Agent (thinking):**\n> mulling the plan" in prompts[0]
    assert sum("second step please" in p for p in prompts) == 1
    assert sum("write it" in p for p in prompts) == 1
    assert not any(CARD_PREFIX in p or "check the bounds\n" in p for p in prompts[1:])
    assert reviewer_status(grove, root)["reviews"] == 2


def test_turns_finishing_while_the_reviewer_is_busy_arrive_coalesced(grove: Grove) -> None:
    root = watched(grove)
    assert grove.ask(root, "[[sim@reviewer ttft_ms=2500]] first").ok
    time.sleep(0.3)
    assert grove.ask(root, "second-turn-text").ok
    assert grove.ask(root, "third-turn-text").ok
    assert grove.wait_reviews(root, 30) == 0
    prompts = reviewer_prompts(grove, root)
    assert len(prompts) == 2
    assert "second-turn-text" in prompts[1] and "third-turn-text" in prompts[1]
    assert reviewer_status(grove, root)["prompts"] == 2


def test_one_failure_then_success(grove: Grove) -> None:
    root = watched(grove)
    assert grove.ask(root, "[[sim@reviewer fault=disconnect after=1 times=1]] go").ok
    assert grove.wait_reviews(root, 30) == 0
    status = reviewer_status(grove, root)
    assert (status["prompts"], status["reviews"], status["backlog"]) == (2, 1, 0)
    assert status["consecutive_failures"] == 0 and status["dropped_backlogs"] == 0


def test_always_failing_drops_the_backlog_with_one_warning(grove: Grove) -> None:
    root = watched(grove)
    assert grove.ask(root, "[[sim@reviewer fault=disconnect after=1]] doomed").ok
    deadline = time.monotonic() + 30
    while reviewer_status(grove, root)["dropped_backlogs"] == 0:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    status = reviewer_status(grove, root)
    assert (status["prompts"], status["reviews"], status["backlog"]) == (3, 0, 0)
    warnings = [m for m in grove.history(root) if m.kind == "warning"]
    assert len(warnings) == 1 and "failed three times in a row" in warnings[0].content
    assert grove.ask(root, "still working").ok  # the watched agent goes on


def test_a_nit_waits_for_the_next_step_without_starting_a_turn(grove: Grove) -> None:
    root = watched(grove)
    assert grove.ask(root, advise("rename x to total") + " compute").ok
    assert grove.wait_reviews(root, 30) == 0
    time.sleep(0.5)
    assert not grove.streaming(root)
    (card,) = grove.advice(root)
    assert card.content == f"{CARD_PREFIX}\nReviewer: advisor\n- [nit] rename x to total"
    assert kinds_after(grove.history(root), card.content) == []  # no turn was started
    assert grove.ask(root, "next").ok
    assert kinds_after(grove.history(root), card.content) == ["user", "assistant"]


def test_a_concern_interrupts_a_turn_at_its_next_step_boundary(grove: Grove) -> None:
    root = watched(grove)
    concern = advise("that is the wrong file", "concern", ttft_ms="1000")
    assert grove.ask(root, concern + " edit the file").ok
    turn = grove.send(root, "[[sim ttft_ms=4000]] slow step")
    assert turn.result(60).ok
    history = grove.history(root)
    after = kinds_after(history, "[[sim ttft_ms=4000]] slow step")
    assert after.count("assistant") == 2  # the concern bought a second step
    (card,) = grove.advice(root)
    assert "- [concern] that is the wrong file" in card.content


def test_a_blocker_on_an_idle_agent_starts_a_turn(grove: Grove) -> None:
    root = watched(grove)
    assert grove.ask(root, advise("stop: the tests are red", "blocker") + " ship it").ok
    assert grove.wait_reviews(root, 30) == 0
    deadline = time.monotonic() + 30
    while True:
        cards = grove.advice(root)
        history = grove.history(root)
        if cards and kinds_after(history, cards[0].content) == ["assistant"]:
            break
        assert time.monotonic() < deadline, [(m.kind, m.content[:30]) for m in history]
        time.sleep(0.2)


def test_the_same_note_is_delivered_once(grove: Grove) -> None:
    root = watched(grove)
    for prompt in ("one", "two"):
        assert grove.ask(root, advise("add a docstring") + f" {prompt}").ok
        assert grove.wait_reviews(root, 30) == 0
    cards = grove.advice(root)
    assert len(cards) == 1


def test_clear_resets_and_enabling_mid_session_replays_nothing(grove: Grove) -> None:
    root = grove.create_root("gpt-6.1-terra").uuid
    assert grove.ask(root, "alpha-old").ok
    assert grove.ask(root, "beta-old").ok
    assert grove.dispatch(root, "/advisor on").ok
    assert grove.ask(root, "gamma-new").ok
    assert grove.wait_reviews(root, 30) == 0
    (prompt,) = reviewer_prompts(grove, root)
    assert "gamma-new" in prompt and "alpha-old" not in prompt and "beta-old" not in prompt
    assert grove.dispatch(root, "/clear").ok
    assert reviewer_prompts(grove, root) == []
    assert grove.ask(root, "delta-after-clear").ok
    assert grove.wait_reviews(root, 30) == 0
    (prompt,) = reviewer_prompts(grove, root)
    assert "delta-after-clear" in prompt and "gamma-new" not in prompt


def test_advisor_off_detaches_and_status_says_so(grove: Grove) -> None:
    root = watched(grove)
    assert grove.dispatch(root, "/advisor off").text == "Advisor off: advisor"
    assert grove.dispatch(root, "/advisor status").text.startswith("No advisor watches")


def test_sync_backlog_off_never_waits(grove: Grove) -> None:
    root = watched(grove)
    assert grove.ask(root, "[[sim@reviewer ttft_ms=3000]] first").ok
    assert grove.ask(root, "second").ok
    assert grove.wait_reviews(root, 0) > 0  # answered while the first review still went on
    assert grove.wait_reviews(root, 30) == 0
