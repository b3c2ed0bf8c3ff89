"""How a stored message reads in `grove history` and the chat's /history
(supervisor/history_text.py).
"""

from __future__ import annotations

from grove.supervisor.history_text import message_block


def message(
    kind: str, content: str, data: dict[str, object], agent: str = "a1"
) -> dict[str, object]:
    return {"id": 7, "agent_uuid": agent, "kind": kind, "content": content, "data": data}


def test_an_inherited_reply_names_its_owner_and_shows_thinking_through_dim() -> None:
    shown = message_block(
        message("assistant", "hello", {"parts": [{"kind": "thinking", "text": "hmm"}]}, "p0"),
        "a1",
        dim=lambda text: f"<{text}>",
    )
    assert shown == "[7] assistant  from p0\n<(thinking) hmm>\nhello"


def test_a_typed_answer_is_json_and_every_text_goes_through_shown() -> None:
    typed = message("assistant", "{}", {"output": {"ok": True}, "output_retries": 1})
    shown = message_block(typed, "a1", shown=str.upper)
    assert shown == '[7] ASSISTANT  (TYPED, AFTER 1 OUTPUT RETRIES)\n{\n  "OK": TRUE\n}'
