"""Search patterns from a model, compiled for RE2 (providers/linear_regex.py): no pattern can
make a search cost more than time in proportion to the text. Every tool taking a pattern uses
this.
"""

from __future__ import annotations

import re2

from grove.providers.errors import PatternError
from grove.providers.linear_regex import CompiledPattern, compile_re2

MAX_PATTERN_CHARS = 2_000


def compile_pattern(
    pattern: str, *, literal: bool = False, ignore_case: bool = False
) -> CompiledPattern:
    """`pattern` ready to search lines with, in time linear in their length."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise PatternError(
            f"the pattern is {len(pattern):,} characters long; at most {MAX_PATTERN_CHARS:,}"
        )
    try:
        return compile_re2(re2.escape(pattern) if literal else pattern, ignore_case=ignore_case)
    except PatternError as exc:
        raise PatternError(
            f"invalid regular expression {pattern!r}: {exc} (the engine is RE2: no "
            "backreferences or lookaround; pass literal=true to search for the text as it is)"
        ) from None
