"""Compaction end to end over Ray and the simulator: /compact summarises the older history with
the agent's model, the model is then sent the summary and the kept messages only, forks of a
compacted parent (and grandparent) start from the summary, and failures change nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from grove.supervisor import Grove
from grove.supervisor.commands.contextual import STREAMING_COMPACT_TEXT
from grove.supervisor.store import open_store
from tests.integration.groves import FAST_RETRIES, cli_environment, invoke, running_grove

MODEL = "claude-haiku-4-5"
SUMMARY = "SUMMARY: four questions about words were asked and answered"
COMPACT = f'/compact [[sim reply="{SUMMARY}"]] keep the question numbers'


@pytest.fixture(scope="module")
def grove(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Grove]:
    env = {"GROVE_COMPACTION__KEEP_RECENT_TOKENS": "150", "GROVE_COMPACTION__ENABLED": "false"}
    env |= FAST_RETRIES | {"GROVE_PROVIDERS__RETRY__ATTEMPTS": "3"}  # faults fail fast
    with running_grove(tmp_path_factory.mktemp("compaction"), hosts=1, env=env) as grove:
        yield grove


def talked(grove: Grove, turns: int = 4) -> str:
    root = grove.create_root(MODEL).uuid
    for n in range(turns):
        assert grove.ask(root, f"[[sim tokens=60]] question {n}: " + "words " * 80).ok
    return root


def input_tokens(grove: Grove, uuid: str) -> int:
    (last,) = [m for m in grove.history(uuid) if m.kind == "assistant"][-1:]
    return int(last.data["usage"]["input_tokens"])


def test_compact_replaces_the_older_history_with_a_summary(grove: Grove) -> None:
    root = talked(grove)
    before = grove.dispatch(root, "/context")
    input_before = input_tokens(grove, root)
    outcome = grove.dispatch(root, COMPACT)
    assert outcome.ok, outcome.text
    assert outcome.data["tokens_after"] < outcome.data["tokens_before"]
    view = grove.history(root)
    summary, *kept = view
    assert (summary.kind, summary.content) == ("compaction", SUMMARY)
    assert summary.data["first_kept_message_id"] == kept[0].id
    assert summary.data["tokens_before"] == outcome.data["tokens_before"]
    assert kept[0].kind == "user" and len(kept) < 8
    assert grove.dispatch(root, "/context").data["used"] < before.data["used"]
    # The next request carries the summary and the kept messages, not the older history.
    assert grove.ask(root, "[[sim tokens=5]] and now?").ok
    assert input_tokens(grove, root) < input_before
    # The store keeps everything; `grove history` shows it with the compaction in its place.
    store = open_store(grove.settings.store)
    try:
        whole = store.conversation(root, compacted=False)
        kinds = [event.kind for event in store.events(limit=10_000)]
    finally:
        store.close()
    assert [m.kind for m in whole].count("user") == 5 and "compaction" in [m.kind for m in whole]
    assert "Compacted" in kinds


def test_a_second_compaction_updates_the_first_summary(grove: Grove) -> None:
    root = talked(grove)
    assert grove.dispatch(root, COMPACT).ok
    for n in range(3):
        assert grove.ask(root, f"[[sim tokens=60]] later {n}: " + "more " * 80).ok
    second = grove.dispatch(root, '/compact [[sim reply="UPDATED"]]')
    assert second.ok, second.text
    summary = grove.history(root)[0]
    assert (summary.kind, summary.content) == ("compaction", "UPDATED")
    assert [m.kind for m in grove.history(root)].count("compaction") == 1


def test_forks_of_a_compacted_parent_and_grandparent_start_from_the_summary(
    grove: Grove,
) -> None:
    root = talked(grove)
    assert grove.dispatch(root, COMPACT).ok
    compacted_view = [m.id for m in grove.history(root)]
    child = grove.dispatch(root, "/fork").data["child"]
    assert [m.id for m in grove.history(child)] == compacted_view
    grandchild = grove.dispatch(child, "/fork").data["child"]
    assert [m.id for m in grove.history(grandchild)] == compacted_view
    assert grove.ask(grandchild, "[[sim tokens=5]] go on").ok
    assert grove.history(grandchild)[0].content == SUMMARY


def test_a_summary_that_fails_or_comes_back_empty_changes_nothing(grove: Grove) -> None:
    root = talked(grove)
    view = [m.id for m in grove.history(root)]
    empty = grove.dispatch(root, '/compact [[sim reply=""]]')
    assert not empty.ok
    assert empty.text == "Compaction failed: the summary came back empty; the history is unchanged"
    assert [m.id for m in grove.history(root)] == view
    assert grove.ask(root, "[[sim tokens=5]] still fine?").ok


def test_compact_is_refused_while_the_agent_streams_and_when_all_is_recent(grove: Grove) -> None:
    root = talked(grove, turns=1)
    assert grove.dispatch(root, "/compact").text.startswith("Nothing to compact yet")
    turn = grove.send(root, "[[sim ttft_ms=2000]] take your time")
    refused = grove.dispatch(root, COMPACT)
    assert not refused.ok and refused.text == STREAMING_COMPACT_TEXT
    assert turn.result(30).ok


def test_context_and_agents_show_how_full_the_context_is(grove: Grove) -> None:
    root = talked(grove, turns=2)
    context = grove.dispatch(root, "/context")
    assert context.text.splitlines()[0].startswith("Context: ")
    assert context.data["window"] == 200_000 and 0 < context.data["used"] < 2_000
    assert context.data["reported"] > 0
    assert "0% context" in grove.dispatch(root, "/agents").text


def test_grove_history_shows_everything_with_the_compaction_marked(
    grove: Grove, tmp_path: Path
) -> None:
    root = talked(grove)
    assert grove.dispatch(root, COMPACT).ok
    env = {**cli_environment(tmp_path), "GROVE_STORE": str(grove.settings.store)}
    shown = invoke(env, "history", root)
    assert shown.returncode == 0, shown.stderr
    assert all(f"question {n}:" in shown.stdout for n in range(4))  # summarised, still shown
    (marker,) = [line for line in shown.stdout.splitlines() if "] compaction" in line]
    assert "(manual: " in marker and "the model sees this summary" in marker


def test_a_summary_request_that_fails_changes_nothing(grove: Grove) -> None:
    root = talked(grove)
    view = [m.id for m in grove.history(root)]
    failed = grove.dispatch(root, "/compact [[sim fault=529 times=10]] summarise")
    assert not failed.ok and failed.text.startswith("Compaction failed: ")
    assert failed.text.endswith("; the history is unchanged")
    assert [m.id for m in grove.history(root)] == view


def test_the_configured_retry_policy_is_what_the_hosts_providers_use(grove: Grove) -> None:
    """`[providers.retry]` reaches the hosts: 3 attempts (not 6), waits under 0.05 s."""
    root = grove.create_root(MODEL).uuid
    turn = grove.send(root, "[[sim fault=529 times=5]] overloaded")
    notices = [text for kind, text in turn if kind == "notice"]
    result = turn.result(60)
    assert not result.ok and "529" in str(result.error), result.error
    assert [text.partition(" failed (")[0] for text in notices] == ["attempt 1", "attempt 2"]
    assert all(text.endswith("; retrying in 0.0s") for text in notices), notices
