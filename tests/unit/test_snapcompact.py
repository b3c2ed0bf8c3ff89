"""snapcompact's pure parts: shapes and budgets per provider, frames that hug their rows,
middle-out eviction with the head pinned, the text tail, the earlier summary printed first,
what frames bill, and the simulator counting an image as billed rather than as base64 text.
"""

from __future__ import annotations

import base64
import io

from PIL import Image

from grove.providers.images import image_tokens, png_size
from grove.simulator.script import estimate_tokens
from grove.supervisor.compaction import chosen_strategy
from grove.supervisor.snapcompact import (
    SUMMARY_HEADER,
    archive,
    frame_budget,
    frame_tokens,
    paginate,
    render,
    shape_for,
)

TEXT = " ".join(
    f"[user]: step {n} of the plan. [assistant]: done with step {n}." for n in range(40)
)


def decoded(frame: str) -> Image.Image:
    return Image.open(io.BytesIO(base64.b64decode(frame)))


def test_each_family_has_its_shape_and_budget() -> None:
    assert [shape_for(p).name for p in ("anthropic", "google", "openai", "other")] == [
        "6x12-dim",
        "doc-8on16-sent-dim",
        "8on16-bw",
        "6x12-dim",
    ]
    assert (shape_for("anthropic").width, shape_for("google").width) == (1568, 2048)
    assert shape_for("google").columns == 2
    assert [frame_budget(p) for p in ("anthropic", "google", "openai", "other")] == [8, 8, 8, 5]


def test_a_frame_is_as_wide_as_its_shape_and_hugs_its_rows() -> None:
    shape = shape_for("anthropic")
    image = Image.open(io.BytesIO(render(["one line", "two lines", "three"], shape)))
    assert image.size == (1568, 3 * 12)
    assert png_size(base64.b64encode(render(["x"], shape)).decode()) == (1568, 12)
    full = paginate("word " * 100_000, shape)[0]
    assert len(full) == shape.rows
    assert Image.open(io.BytesIO(render(full, shape))).size == (1568, shape.rows * 12)


def test_an_earlier_summary_is_printed_first() -> None:
    made = archive(TEXT, "anthropic", earlier_summary="the plan has 40 steps")
    assert len(made.frames) == 1 and made.text_tail == ""
    first_line = paginate(f"{SUMMARY_HEADER} the plan has 40 steps {TEXT}", shape_for("x"))[0][0]
    assert first_line.startswith(SUMMARY_HEADER)
    assert decoded(made.frames[0]).size[0] == 1568


def test_beyond_the_budget_the_head_stays_and_the_oldest_others_go() -> None:
    earlier = [archive(f"frame {n} " + TEXT, "anthropic").frames[0] for n in range(8)]
    made = archive(TEXT + " " + TEXT, "anthropic", earlier_frames=earlier)
    assert len(made.frames) == 8 and made.evicted == 1
    assert made.frames[0] == earlier[0]  # the head is pinned
    assert made.frames[1:7] == tuple(earlier[2:])  # the oldest unpinned one went
    assert made.frames[7] not in earlier


def test_pages_that_do_not_fit_stay_as_a_text_tail_of_two_capacities_at_most() -> None:
    shape = shape_for("other")  # a budget of 5 frames
    huge = "word " * (shape.capacity * 2)  # about 10 frames of text
    made = archive(huge, "other")
    assert len(made.frames) == 5
    assert 0 < len(made.text_tail) <= 2 * shape.capacity
    assert "characters elided" in made.text_tail
    assert "The newest archived part, not in the images:" in made.guide()


def test_frames_bill_less_than_half_the_text_they_replace_on_claude_and_gemini() -> None:
    text = "The parser drops the final line of each block; fix it and add a test. " * 1_500
    for provider in ("anthropic", "google"):
        made = archive(text, provider)
        assert frame_tokens(provider, made.frames) <= 0.5 * len(text) / 4, provider


def test_strategy_falls_back_to_a_summary_with_a_warning() -> None:
    assert chosen_strategy("snapcompact", True, None) == ("snapcompact", None)
    assert chosen_strategy("snapcompact", True, "keep paths") == ("summary", None)
    strategy, warning = chosen_strategy("snapcompact", False, None)
    assert strategy == "summary" and warning is not None and "cannot read images" in warning
    assert chosen_strategy("summary", True, None) == ("summary", None)


def test_the_simulator_counts_an_image_as_billed_not_as_its_base64() -> None:
    frame = archive(TEXT, "anthropic").frames[0]
    width, height = png_size(frame)
    blocks = {
        "anthropic": {"type": "image", "source": {"type": "base64", "data": frame}},
        "openai": {"type": "input_image", "image_url": f"data:image/png;base64,{frame}"},
        "google": {"inline_data": {"mime_type": "image/png", "data": frame}},
    }
    for provider, block in blocks.items():
        counted = estimate_tokens([{"content": [block]}], provider)
        assert counted == image_tokens(provider, width, height), provider
    chat = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{frame}"}}
    assert estimate_tokens([chat], "openai") == image_tokens("openai", width, height)
