"""snapcompact (spec/compaction.md): compacted history printed onto PNG frames with bundled
bitmap fonts, the shape per provider family, frame budgets, middle-out eviction, the text tail.
"""

from __future__ import annotations

import base64
import io
import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

from grove.providers.images import image_tokens, png_size

FONTS = Path(__file__).with_name("fonts")
MAX_FRAMES = 8
UNKNOWN_PROVIDER_FRAMES = 5
# Images a request may carry, per provider (the budget is this clamped to MAX_FRAMES).
IMAGE_CAPS = {"anthropic": 100, "openai": 500, "google": 3_000}
INK = 0
DIM_INK = 150
PAPER = 255
COLUMN_GAP = 16
SENTENCE_HUES = ((20, 20, 20), (120, 30, 30), (25, 60, 130), (25, 100, 40))
# Printed lighter, so the words that carry the meaning stand out.
STOPWORD_TEXT = """a an and are as at be but by for from had has have he her his i if in into is it
its of on or she so than that the their them then there these they this to was we were which
will with you your"""
STOPWORDS = frozenset(STOPWORD_TEXT.split())
SUMMARY_HEADER = "[Summary of earlier history]"
_WORD = re.compile(r"\S+")
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)")


@dataclass(frozen=True, slots=True)
class Shape:
    """How a frame is printed: the font, the line pitch, the frame width, the columns, and
    whether stopwords are dimmed and sentences tinted."""

    name: str
    font: str
    glyph_width: int
    pitch: int
    width: int
    columns: int = 1
    dim_stopwords: bool = False
    sentence_hue: bool = False

    @property
    def column_chars(self) -> int:
        column_width = (self.width - COLUMN_GAP * (self.columns - 1)) // self.columns
        return column_width // self.glyph_width

    @property
    def rows(self) -> int:
        """Rows of a full frame: frames are at most as tall as they are wide."""
        return self.width // self.pitch

    @property
    def capacity(self) -> int:
        """Characters a full frame holds."""
        return self.column_chars * self.rows * self.columns


SHAPES = {
    "6x12-dim": Shape("6x12-dim", "6x12", 6, 12, 1568, dim_stopwords=True),
    "doc-8on16-sent-dim": Shape(
        "doc-8on16-sent-dim",
        "8x13",
        8,
        16,
        2048,
        columns=2,
        dim_stopwords=True,
        sentence_hue=True,
    ),
    "8on16-bw": Shape("8on16-bw", "8x13", 8, 16, 1568),
}
FAMILY_SHAPES = {"anthropic": "6x12-dim", "google": "doc-8on16-sent-dim", "openai": "8on16-bw"}


def shape_for(provider: str) -> Shape:
    """Claude reads 6x12 with dimmed stopwords, Gemini two tinted columns of 8x13, OpenAI and
    compatible servers 8x13 on a 16-pixel pitch; an unknown family gets Claude's."""
    return SHAPES[FAMILY_SHAPES.get(provider, "6x12-dim")]


def frame_budget(provider: str) -> int:
    return min(IMAGE_CAPS.get(provider, UNKNOWN_PROVIDER_FRAMES), MAX_FRAMES)


@cache
def _font(name: str) -> ImageFont.ImageFont:
    return ImageFont.load(str(FONTS / f"{name}.pil"))


def collapse(text: str) -> str:
    """Whitespace runs become one space; characters the fonts lack become `?`."""
    flat = " ".join(text.split())
    return flat.encode("latin-1", "replace").decode("latin-1")


def paginate(text: str, shape: Shape) -> list[list[str]]:
    """The text as pages of lines: a one-column shape is a character grid (every line full),
    a two-column document is word-wrapped; a page holds `rows x columns` lines, column after
    column."""
    flat = collapse(text)
    width = shape.column_chars
    if shape.columns == 1:
        lines = [flat[start : start + width] for start in range(0, len(flat), width)]
    else:
        lines = textwrap.wrap(flat, width, break_long_words=True, break_on_hyphens=False)
    per_page = shape.rows * shape.columns
    return [lines[start : start + per_page] for start in range(0, len(lines), per_page)]


def render(lines: Sequence[str], shape: Shape) -> bytes:
    """One frame as PNG bytes; its height hugs the rows printed."""
    rows = min(len(lines), shape.rows)
    height = max(1, rows) * shape.pitch
    font = _font(shape.font)
    mode = "RGB" if shape.sentence_hue else "L"
    paper = (PAPER, PAPER, PAPER) if shape.sentence_hue else PAPER
    image = Image.new(mode, (shape.width, height), paper)
    draw = ImageDraw.Draw(image)
    column_width = shape.column_chars * shape.glyph_width + COLUMN_GAP
    sentence = 0
    for index, line in enumerate(lines):
        column, row = divmod(index, shape.rows)
        x, y = column * column_width, row * shape.pitch
        if shape.sentence_hue:
            sentence = _draw_tinted(draw, font, line, x, y, shape, sentence)
        else:
            draw.text((x, y), line, font=font, fill=INK)
        if shape.dim_stopwords:
            dim = (DIM_INK, DIM_INK, DIM_INK) if shape.sentence_hue else DIM_INK
            for match in _WORD.finditer(line):
                if match.group().lower().strip(".,;:!?()\"'") in STOPWORDS:
                    position = (x + match.start() * shape.glyph_width, y)
                    draw.text(position, match.group(), font=font, fill=dim)
    if shape.sentence_hue:  # a few inks: a small palette keeps the PNG small
        image = image.convert("P", palette=Image.Palette.ADAPTIVE, colors=16)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", optimize=False)
    return buffer.getvalue()


def frame_tokens(provider: str, frames: Sequence[str]) -> int:
    """What the frames bill as input on `provider`."""
    return sum(image_tokens(provider, *png_size(frame)) for frame in frames)


def _draw_tinted(
    draw: ImageDraw.ImageDraw,
    font: ImageFont.ImageFont,
    line: str,
    x: int,
    y: int,
    shape: Shape,
    sentence: int,
) -> int:
    """Each sentence in the next hue; returns the sentence the line ends in."""
    start = 0
    for end in [m.end() for m in _SENTENCE_END.finditer(line)] + [len(line)]:
        if end > start:
            colour = SENTENCE_HUES[sentence % len(SENTENCE_HUES)]
            draw.text((x + start * shape.glyph_width, y), line[start:end], font=font, fill=colour)
        if end < len(line) or _SENTENCE_END.search(line[start:end]):
            sentence += 1
        start = end
    return sentence


def elided(text: str, limit: int) -> str:
    """At most `limit` characters: the middle goes."""
    if len(text) <= limit:
        return text
    half = (limit - 40) // 2
    return f"{text[:half]} [... {len(text) - 2 * half:,} characters elided ...] {text[-half:]}"


@dataclass(frozen=True, slots=True)
class Archive:
    """Frames (base64 PNG, oldest first; the first is the pinned head) and the newest history
    that did not fit in them, as text."""

    shape: str
    frames: tuple[str, ...]
    text_tail: str
    evicted: int  # earlier frames dropped to make room

    def guide(self) -> str:
        """The compaction's text: how to read the frames, then the text tail."""
        shape = SHAPES[self.shape]
        lines = [
            f"The earlier conversation is printed on the {len(self.frames)} image(s) that "
            f"follow, oldest first ({shape.name}: {shape.columns} column(s) of "
            f"{shape.column_chars} characters a line; role tags such as [user] and "
            "[assistant] mark each message; common words are printed lighter)."
        ]
        if self.evicted:
            lines.append(f"{self.evicted} older image(s) between the first and these were let go.")
        if self.text_tail:
            lines += ["The newest archived part, not in the images:", self.text_tail]
        return "\n".join(lines)


def archive(
    history: str,
    provider: str,
    *,
    earlier_frames: Sequence[str] = (),
    earlier_summary: str | None = None,
) -> Archive:
    """Print `history` (what this compaction discards) after the earlier frames. A text
    summary from an earlier compaction is printed first. Beyond the budget the first frame
    stays and the oldest of the rest go; pages that still do not fit stay as a text tail of at
    most two frame capacities."""
    shape = shape_for(provider)
    budget = frame_budget(provider)
    if earlier_summary:
        history = f"{SUMMARY_HEADER} {earlier_summary} {history}"
    pages = paginate(history, shape)
    frames = list(earlier_frames)
    evicted = 0
    while frames and len(frames) + len(pages) > budget and len(frames) > 1:
        del frames[1]  # the oldest unpinned frame
        evicted += 1
    room = max(0, budget - len(frames))
    framed, rest = pages[:room], pages[room:]
    frames += [base64.b64encode(render(page, shape)).decode("ascii") for page in framed]
    tail = " ".join(line for page in rest for line in page)
    return Archive(shape.name, tuple(frames), elided(tail, 2 * shape.capacity), evicted)
