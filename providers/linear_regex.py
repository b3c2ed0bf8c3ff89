"""Regular expressions Grove did not write, compiled for RE2, a linear-time engine: a search
costs time in proportion to the text, whatever the pattern. Tools' search patterns
(actors/tools/patterns.py) and output schemas' patterns (providers/output_schema.py) use it.

Python's `re` backtracks, and holds the GIL while it does, so a pattern such as `(A+)+B` on a
few dozen characters stalls every agent of a host even from a thread; RE2 cannot backtrack.
"""

from __future__ import annotations

from typing import Protocol

import re2

from grove.providers.errors import PatternError

# What RE2 may spend on one compiled pattern; past it, compiling fails (e.g. `a{1000}{1000}`).
MAX_PATTERN_MEMORY = 8 << 20


class CompiledPattern(Protocol):
    def search(self, text: str) -> object | None: ...


def compile_re2(expression: str, *, ignore_case: bool = False) -> CompiledPattern:
    """`expression` compiled by RE2 within MAX_PATTERN_MEMORY; PatternError says RE2's reason."""
    options = re2.Options()
    options.log_errors = False
    options.max_mem = MAX_PATTERN_MEMORY
    options.never_capture = True
    options.case_sensitive = not ignore_case
    try:
        compiled: CompiledPattern = re2.compile(expression, options)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", errors="replace")
        raise PatternError(str(reason)) from None
    return compiled
