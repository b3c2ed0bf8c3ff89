"""Reading a whole small text file the user named: bounded while it is read, a leading BOM
dropped, UTF-8 checked; each failure one line naming the file, in the caller's error type.
"""

from __future__ import annotations

from pathlib import Path

UTF8_BOM = b"\xef\xbb\xbf"


def read_text_file(
    path: Path, *, what: str, limit: int, error: type[Exception], past_limit: str = ""
) -> str:
    """The text of `path` (called `what` in messages), at most `limit` bytes; otherwise
    `error` saying why: unreadable, larger than `limit` (then `past_limit` is added), not UTF-8."""
    try:
        with path.open("rb") as file:
            data = file.read(limit + 1)
    except OSError as exc:
        raise error(f"cannot read {what}: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise error(f"{what} is larger than {limit:,} bytes{past_limit}")
    try:
        return data.removeprefix(UTF8_BOM).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{what} is not UTF-8 text (byte {exc.start + 1})") from None
