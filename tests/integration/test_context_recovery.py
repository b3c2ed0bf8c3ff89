"""A turn that meets the context limit recovers: over the window (each provider's real error,
from a simulator enforcing a small window) the agent's history is compacted and the request
sent again, once; a request still over the window after that is a clear error, not a loop; a
reply cut off while the context has room is left as it is (test_auto_compaction.py has the
cut-off reply with a full context).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from grove.providers.http import Endpoint
from grove.simulator import SimulatorConfig, SimulatorThread
from grove.supervisor import Grove
from tests.integration.groves import compactions, running_grove

KEY = "sim-recovery-key-2b9c"
WINDOW = 2_000
MODELS = ("claude-haiku-4-5", "gpt-5-mini", "gemini-3.0-flash")
CHUNK = "words " * 260  # about 390 tokens


@pytest.fixture(scope="module")
def simulator() -> Iterator[SimulatorThread]:
    with SimulatorThread(SimulatorConfig(api_key=KEY, context_window=WINDOW)) as running:
        yield running


@pytest.fixture(scope="module")
def grove(tmp_path_factory: pytest.TempPathFactory, simulator: SimulatorThread) -> Iterator[Grove]:
    env = {"GROVE_COMPACTION__KEEP_RECENT_TOKENS": "1000"}
    endpoint = Endpoint(base_url=simulator.base_url, api_key=KEY)
    base = tmp_path_factory.mktemp("recovery")
    with running_grove(base, hosts=1, env=env, endpoint=endpoint) as grove:
        yield grove


def message_texts(message: dict[str, Any]) -> list[str]:
    """The texts of one Anthropic wire message (its content is a string or a list of blocks)."""
    content = message["content"]
    if isinstance(content, str):
        return [content]
    return [block["text"] for block in content if block.get("type") == "text"]


@pytest.mark.parametrize("model", MODELS)
def test_an_overflowing_turn_is_compacted_and_sent_again(grove: Grove, model: str) -> None:
    root = grove.create_root(model).uuid
    for n in range(3):
        assert grove.ask(root, f"[[sim tokens=20]] part {n}: {CHUNK}").ok
    assert compactions(grove, root) == []
    turn = grove.send(root, f"[[sim reply='all read']] last part: {CHUNK}{CHUNK}")
    shown = list(turn)
    result = turn.result()
    assert result.ok, result.error
    assert ("notice", "── context compacted (overflow); asking again ──") in shown
    assert result.text == "all read"
    (compacted,) = compactions(grove, root)
    assert compacted["reason"] == "overflow"
    view = grove.history(root)
    assert view[0].kind == "compaction" and view[-1].content == "all read"


def test_a_prompt_over_the_window_on_its_own_is_a_clear_error(grove: Grove) -> None:
    root = grove.create_root("claude-haiku-4-5").uuid
    result = grove.ask(root, CHUNK * 6)
    assert not result.ok and result.error is not None
    assert result.error.startswith("Context overflow recovery failed: ")
    assert "prompt is too long" in result.error
    assert grove.ask(root, "[[sim tokens=5]] a short one").ok is False  # the long prompt stays
    assert grove.dispatch(root, "/clear").ok
    assert grove.ask(root, "[[sim tokens=5]] a short one").ok


def test_a_cut_off_reply_with_room_in_the_context_is_left_as_it_is(grove: Grove) -> None:
    root = grove.create_root("claude-haiku-4-5").uuid
    assert grove.ask(root, f"[[sim tokens=20]] part 0: {CHUNK}").ok
    # 0.8 of the catalog's 200,000-token window is far off: the context is not the cause.
    result = grove.ask(root, "[[sim stop=length tokens=8]] go on")
    assert result.ok and result.stop_reason == "max_tokens"
    assert compactions(grove, root) == []


def test_after_a_compaction_the_model_is_sent_summary_kept_and_new_only(
    grove: Grove, simulator: SimulatorThread
) -> None:
    root = grove.create_root("claude-haiku-4-5").uuid
    for n in range(3):
        assert grove.ask(root, f"[[sim tokens=20]] old part {n}: {CHUNK}").ok
    compacted = grove.dispatch(root, '/compact [[sim reply="SUMMARY OF THE OLD PARTS"]]')
    assert compacted.ok, compacted.text
    kept = grove.history(root)[1:]
    assert grove.ask(root, "[[sim tokens=5]] the newest question").ok
    (sent,) = [b for b in simulator.simulator.received if "the newest question" in json.dumps(b)]
    texts = [text for message in sent["messages"] for text in message_texts(message)]
    assert "<summary>\nSUMMARY OF THE OLD PARTS\n</summary>" in texts[0]
    assert not any("old part 0" in text for text in texts)  # summarised away
    assert [k.content for k in kept if k.kind == "user"] == [
        t for t in texts[1:] if "old part" in t
    ]  # the kept messages, word for word
    assert "the newest question" in texts[-1]
