"""snapcompact end to end over Ray and the simulator: the discarded history goes onto PNG frames
(no summary request), each wire carries them in its own image block and the simulator bills
them as images, `/context frames DIR` writes them, and a later compaction carries them on.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image

from grove.providers.images import image_tokens
from grove.supervisor import Grove
from tests.integration.groves import running_grove

MODELS = ("claude-haiku-4-5", "gpt-5-mini", "gemini-3.0-flash")
PROVIDERS = {"claude-haiku-4-5": "anthropic", "gpt-5-mini": "openai", "gemini-3.0-flash": "google"}


@pytest.fixture(scope="module")
def grove(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Grove]:
    env = {
        "GROVE_COMPACTION__STRATEGY": "snapcompact",
        "GROVE_COMPACTION__KEEP_RECENT_TOKENS": "150",
        "GROVE_COMPACTION__ENABLED": "false",
    }
    with running_grove(tmp_path_factory.mktemp("snap"), hosts=1, env=env) as grove:
        yield grove


def talked(grove: Grove, model: str, turns: int = 4) -> str:
    root = grove.create_root(model).uuid
    for n in range(turns):
        assert grove.ask(root, f"[[sim tokens=40]] step {n}: parse the file. " + "data " * 60).ok
    return root


@pytest.mark.parametrize("model", MODELS)
def test_compact_prints_the_history_on_frames_the_model_is_sent(
    grove: Grove, model: str, tmp_path: Path
) -> None:
    root = talked(grove, model)
    outcome = grove.dispatch(root, "/compact")
    assert outcome.ok, outcome.text
    compaction = grove.history(root)[0]
    assert compaction.kind == "compaction" and compaction.data["strategy"] == "snapcompact"
    frames = compaction.data["frames"]
    assert len(frames) == 1 and "printed on the 1 image(s)" in compaction.content
    written = grove.dispatch(root, f"/context frames {tmp_path / 'frames'}")
    assert written.ok, written.text
    (path,) = written.data["files"]
    width, height = Image.open(path).size
    assert width in (1568, 2048) and 0 < height <= width
    # The next request carries the frame as an image, billed as one by the simulator.
    assert grove.ask(root, "[[sim tokens=5]] go on").ok
    reply = [m for m in grove.history(root) if m.kind == "assistant"][-1]
    assert reply.data["usage"]["input_tokens"] >= image_tokens(PROVIDERS[model], width, height)


def test_a_later_compaction_carries_the_frames_on(grove: Grove) -> None:
    root = talked(grove, "claude-haiku-4-5")
    assert grove.dispatch(root, "/compact").ok
    first = grove.history(root)[0].data["frames"]
    for n in range(4):
        assert grove.ask(root, f"[[sim tokens=40]] later {n}: " + "more " * 60).ok
    assert grove.dispatch(root, "/compact").ok
    second = grove.history(root)[0].data["frames"]
    assert second[0] == first[0] and len(second) == 2


def test_instructions_ask_for_a_summary_and_no_frames_is_a_clear_error(grove: Grove) -> None:
    root = talked(grove, "claude-haiku-4-5")
    missing = grove.dispatch(root, "/context frames /tmp/nowhere")
    assert not missing.ok and missing.text.startswith("This agent's context holds no frames")
    outcome = grove.dispatch(root, '/compact [[sim reply="A SUMMARY"]] keep the steps')
    assert outcome.ok and grove.history(root)[0].content == "A SUMMARY"
    assert grove.history(root)[0].data["strategy"] == "summary"
