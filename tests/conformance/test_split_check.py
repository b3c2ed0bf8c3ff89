"""The every-split check of corpus.py fails on decoders that go wrong only where a chunk ends.

Each decoder below reads a body given whole as SSEDecoder does; the check must catch it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from grove.providers.sse import ServerSentEvent, SSEDecoder
from tests.conformance.corpus import assert_every_split_decodes_alike, body, decode_all, manifest


class LosesHeldLine(SSEDecoder):
    """Drops the unterminated line it holds when the next chunk comes."""

    __slots__ = ()

    def decode(self, chunk: bytes) -> list[ServerSentEvent]:
        self._partial = []
        return super().decode(chunk)


class ForgetsCarriageReturn(SSEDecoder):
    """Forgets that the last chunk ended in CR, so the LF after it ends one more line."""

    __slots__ = ()

    def decode(self, chunk: bytes) -> list[ServerSentEvent]:
        self._skip_lf = False
        return super().decode(chunk)


class DecodesEachChunkAlone(SSEDecoder):
    """Decodes each chunk's UTF-8 by itself: a character cut by a chunk's end is lost."""

    __slots__ = ()

    def decode(self, chunk: bytes) -> list[ServerSentEvent]:
        return self._text(chunk.decode("utf-8", "replace"))


class ForgetsEventName(SSEDecoder):
    """Forgets an event's `event:` line when its `data:` line comes in the next chunk."""

    __slots__ = ()

    def decode(self, chunk: bytes) -> list[ServerSentEvent]:
        self._event = ""
        return super().decode(chunk)


def smallest(wanted: Callable[[dict[str, Any], bytes], bool]) -> bytes:
    return min((body(e) for e in manifest()["entries"] if wanted(e, body(e))), key=len)


CASES = [
    (LosesHeldLine, lambda entry, data: True),
    (ForgetsCarriageReturn, lambda entry, data: b"\r\n" in data),
    (DecodesEachChunkAlone, lambda entry, data: entry["framing"]["contains_non_ascii_utf8"]),
    (ForgetsEventName, lambda entry, data: b"\nevent:" in data),
]


@pytest.mark.parametrize(("decoder", "wanted"), CASES, ids=[case[0].__name__ for case in CASES])
def test_a_decoder_wrong_at_chunk_ends_fails_the_split_check(
    decoder: type[SSEDecoder], wanted: Callable[[dict[str, Any], bytes], bool]
) -> None:
    data = smallest(wanted)
    whole = decode_all([data])
    mutant = decoder()
    assert mutant.decode(data) + mutant.flush() == whole
    with pytest.raises(AssertionError, match="mutant @"):
        assert_every_split_decodes_alike(data, whole, "mutant", decoder)
    assert_every_split_decodes_alike(data, whole, "SSEDecoder")
