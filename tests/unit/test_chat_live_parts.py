"""The live chat's pure parts: the status line's text and tier, an unfinished line cut into
rows, whole lines kept apart from the one still being written, a queued prompt as shown, the
prompt limit.
"""

from __future__ import annotations

import io
from dataclasses import replace

from grove.cli.chat_live import too_long
from grove.cli.chat_screen import LiveOutput, rows_of, split_rows
from grove.cli.chat_status import Status, status_text
from grove.cli.chat_turns import shortened
from grove.cli.styles import DIM, RESET
from grove.supervisor.batch.tasks import MAX_TEXT_BYTES


def test_the_status_line_while_a_turn_streams_and_after() -> None:
    streaming = Status(
        agent="1a2b3c4d", model="claude-haiku-4-5", thinking="low", used=1_000, window=200_000,
        output_tokens=1_234, cost_usd=0.0061, estimated=True, queued=2,
    )  # fmt: skip
    assert status_text(streaming) == (
        "1a2b3c4d · claude-haiku-4-5/low · ~1,234 tokens out · ~$0.0061 · 1% context · 2 queued"
    )
    ended = Status(
        agent="1a2b3c4d", model="claude-haiku-4-5", used=3_000, window=200_000,
        input_tokens=2_000, output_tokens=900, cost_usd=0.0052,
    )  # fmt: skip
    assert status_text(ended) == (
        "1a2b3c4d · claude-haiku-4-5/default · 2,000 in, 900 out · $0.0052 · 2% context"
    )
    assert status_text(Status(agent="root")) == "root · no model"


def test_the_status_line_names_a_tier_other_than_standard() -> None:
    batch = Status(agent="1a2b3c4d", model="claude-haiku-4-5", tier="batch", input_tokens=10)
    assert status_text(batch) == "1a2b3c4d · claude-haiku-4-5/default · batch tier · 10 in, 0 out"
    flex = Status(agent="root", model="gpt-5-mini", thinking="low", tier="flex")
    assert status_text(flex) == "root · gpt-5-mini/low · flex tier"
    assert status_text(replace(flex, tier="standard")) == "root · gpt-5-mini/low"


def test_an_unfinished_line_is_cut_into_rows_as_a_terminal_wraps_it() -> None:
    segments = [("", "abcdef"), (DIM, "ghij")]
    assert rows_of(segments, 4) == [[("", "abcd")], [("", "ef"), (DIM, "gh")], [(DIM, "ij")]]
    assert rows_of([("", "日本語")], 4) == [[("", "日本")], [("", "語")]]  # two cells each
    scrolled, kept = split_rows(segments, 4, keep=2)
    assert scrolled == ["abcd"]
    assert kept == [("", "ef"), (DIM, "gh"), (DIM, "ij")]
    assert split_rows(segments, 5, keep=2) == ([], segments)


def test_whole_lines_go_out_and_the_unfinished_one_waits_in_the_prompt() -> None:
    terminal = io.StringIO()
    output = LiveOutput(terminal)
    output.write(f"first line\nsecond {DIM}half")
    output.write(f" dim{RESET} and more")
    output.redraw()  # no prompt is running: whole lines are written at once
    assert terminal.getvalue() == "first line\n"
    assert output.unfinished(80) == [
        ("", "second "), ("dim", "half dim"), ("", " and more"), ("", "\n")
    ]  # fmt: skip
    output.write("\n")
    output.redraw()
    assert terminal.getvalue() == f"first line\nsecond {DIM}half dim{RESET} and more\n"
    assert output.unfinished(80) == []


def test_a_queued_prompt_is_shown_by_its_first_line() -> None:
    assert shortened("  short prompt ") == "short prompt"
    assert shortened("first line\nsecond line") == "first line…"
    assert shortened("x" * 100) == "x" * 60 + "…"


def test_a_line_over_the_prompt_limit_is_refused() -> None:
    assert too_long("x" * MAX_TEXT_BYTES) is None
    assert too_long("é" * MAX_TEXT_BYTES) == (
        f"A line of {2 * MAX_TEXT_BYTES:,} bytes is over the prompt limit of "
        f"{MAX_TEXT_BYTES:,}; not sent"
    )
