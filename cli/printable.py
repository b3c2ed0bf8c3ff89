"""Untrusted text made safe to print on a terminal: a model's reply and thinking, tool calls and
results, file names, provider errors. Every renderer passes such text through `printable`.

Control characters other than newline and tab are shown, not obeyed: C0 and DEL in caret
notation (ESC is `^[`, so OSC 52 or CSI 2J arrive as harmless text), C1 controls and the
bidirectional overrides and isolates (which reorder what a line seems to say) as `<U+XXXX>`.
"""

from __future__ import annotations

import re

# C0 controls but tab and newline, DEL, C1 controls; the bidi embeddings, overrides, isolates.
_UNSAFE = re.compile("\r\n|[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _shown(match: re.Match[str]) -> str:
    char = match.group()
    if char == "\r\n":  # a line ending, as a terminal would show it anyway
        return "\n"
    code = ord(char)
    if code < 0x20:
        return "^" + chr(code + 0x40)
    if code == 0x7F:
        return "^?"
    return f"<U+{code:04X}>"


def printable(text: str) -> str:
    """`text` with every character that could drive a terminal shown visibly instead."""
    return _UNSAFE.sub(_shown, text) if _UNSAFE.search(text) else text
