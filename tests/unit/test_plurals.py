"""Counts in Grove's texts: one noun for one, the plural for every other count."""

from __future__ import annotations

from grove.cli.agents import tree_lines
from grove.providers.plurals import counted
from grove.supervisor.batch.summary import Totals, summary_line
from grove.supervisor.supervision import RestartPolicy, given_up_text


def test_one_takes_the_singular_every_other_count_the_plural() -> None:
    assert counted(1, "agent") == "1 agent"
    assert counted(0, "agent") == "0 agents"
    assert counted(2, "agent") == "2 agents"
    assert counted(1_024, "event") == "1,024 events"


def test_an_irregular_plural_is_given() -> None:
    assert counted(1, "child", "children") == "1 child"
    assert counted(3, "child", "children") == "3 children"
    assert counted(1, "retry", "retries") == "1 retry"
    assert counted(2, "retry", "retries") == "2 retries"


def test_a_float_count_formatted_by_its_spec() -> None:
    assert counted(1.0, "day", spec="g") == "1 day"
    assert counted(0.5, "day", spec="g") == "0.5 days"
    assert counted(7.0, "day", spec="g") == "7 days"


def test_grove_texts_count_one_in_the_singular() -> None:
    assert "Host h1 died 1 time within 60 s;" in given_up_text("h1", RestartPolicy(max_restarts=0))
    assert "Host h1 died 6 times within 60 s;" in given_up_text("h1", RestartPolicy())
    totals = Totals(total=1, over_budget=1)
    assert ". 1 task skipped: the budget was spent;" in summary_line(totals, 1.0, "out.jsonl")
    row = {"uuid": "a1", "role": "root", "status": "stopped", "provider": None, "model": None}
    assert tree_lines([{**row, "parent_uuid": None, "messages": 1}])[0].endswith("  1 message")
