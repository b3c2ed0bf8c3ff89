"""Compaction's pure parts: the cut point (never on a tool result), the summary request's text,
and context accounting from reported usage plus estimates.
"""

from __future__ import annotations

from typing import Any

from grove.actors.transcript import entry_to_message
from grove.supervisor.compaction import clipped, find_cut, serialize, summary_prompt
from grove.supervisor.context import context_usage, message_tokens
from grove.supervisor.store.records import MessageRecord

AGENT = "a" * 36


def message(id: int, kind: str, content: str = "", **data: Any) -> MessageRecord:
    return MessageRecord(
        id=id, agent_uuid=AGENT, kind=kind, content=content, data=data, created_at=0.0
    )


def call(id: int, name: str, text: str = "") -> MessageRecord:
    parts = [{"kind": "tool_call", "call_id": f"c{id}", "name": name, "arguments": {"q": text}}]
    return message(id, "assistant", "", parts=parts)


def result(id: int, name: str, content: str) -> MessageRecord:
    parts = [{"kind": "tool_result", "call_id": f"c{id - 1}", "name": name, "content": content}]
    return message(id, "tool_result", "", parts=parts)


def test_the_cut_keeps_the_recent_tokens_and_never_falls_on_a_tool_result() -> None:
    history = [
        message(1, "user", "x" * 400),
        message(2, "assistant", "y" * 400),
        message(3, "user", "z" * 40),
        call(4, "read", "a.txt"),
        result(5, "read", "w" * 400),
        message(6, "assistant", "done"),
    ]
    # Keeping ~110 tokens reaches back into the tool result: the cut moves to its call.
    assert find_cut(history, 110) == 3
    assert find_cut(history, 1) == 5
    assert find_cut(history, 10_000) == 0  # everything is recent: nothing to summarise
    assert find_cut([], 100) == 0


def test_the_summary_request_serialises_calls_results_and_instructions() -> None:
    history = [message(1, "user", "fix the bug"), call(2, "read", "a.py"), result(3, "read", "ok")]
    text = serialize(history)
    assert text.splitlines() == [
        "[user]: fix the bug",
        '[assistant calls read]: {"q": "a.py"}',
        "[read result]: ok",
    ]
    first = summary_prompt(history, None, "keep the file names")
    assert "<previous-summary>" not in first and "<conversation>\n[user]: fix the bug" in first
    assert first.endswith("<instructions>\nkeep the file names\n</instructions>")
    update = summary_prompt(history, "## Goal\nfix", None)
    assert update.startswith("<previous-summary>\n## Goal\nfix\n</previous-summary>")
    assert "<instructions>" not in update


def test_long_tool_results_keep_head_and_tail() -> None:
    text = "h" * 3000 + "t" * 3000
    kept = clipped(text, 2000)
    assert kept.startswith("h" * 1200) and kept.endswith("t" * 800)
    assert "4,000 characters left out" in kept


def test_context_usage_starts_from_the_reported_input_and_estimates_the_rest() -> None:
    usage = {"input_tokens": 1000, "output_tokens": 50}
    view = [
        message(1, "user", "x" * 400),
        message(2, "assistant", "reply", usage=usage, parts=[{"kind": "text", "text": "r"}]),
        message(3, "user", "y" * 400),
    ]
    measured = context_usage(view, "s" * 400, window=10_000)
    assert measured.reported == 1050
    assert measured.used == 1050 + message_tokens(view[2])
    assert measured.system > 0 and measured.tool_results == 0
    # Before any reply: all estimated.
    estimated = context_usage(view[:1], None, window=10_000)
    assert estimated.used == message_tokens(view[0]) and estimated.reported == 0


def test_usage_reported_before_a_compaction_does_not_count() -> None:
    stale = {"input_tokens": 90_000, "output_tokens": 50}
    view = [
        message(9, "compaction", "summary", first_kept_message_id=2),
        message(2, "assistant", "old", usage=stale, parts=[{"kind": "text", "text": "old"}]),
        message(10, "user", "new question"),
    ]
    assert context_usage(view, None, window=200_000).used < 100


def test_a_compaction_reaches_the_model_as_a_user_message_holding_the_summary() -> None:
    shown = entry_to_message(message(9, "compaction", "## Goal\nship it"))
    assert shown is not None and shown.role == "user"
    assert "<summary>\n## Goal\nship it\n</summary>" in shown.parts[0].text  # type: ignore[union-attr]


def test_each_providers_context_length_error_is_recognised() -> None:
    from grove.providers.errors import is_context_overflow

    assert is_context_overflow("anthropic: 400 invalid_request_error: prompt is too long: 9 > 8")
    assert is_context_overflow(
        "openai: 400 invalid_request_error: This model's maximum context length is 128000 "
        "tokens. However, your messages resulted in 130000 tokens."
    )
    assert is_context_overflow("openai: 400 context_length_exceeded: Your input exceeds the")
    assert is_context_overflow(
        "google: 400 INVALID_ARGUMENT: The input token count (1200000) exceeds the maximum "
        "number of tokens allowed (1048576)."
    )
    assert not is_context_overflow("anthropic: 429 rate_limit_error: slow down")
    assert not is_context_overflow("google: 400 INVALID_ARGUMENT: bad schema")
