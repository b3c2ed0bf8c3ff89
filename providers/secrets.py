"""Keeping secrets out of text: the masking every error, log line and stored message of Grove
goes through, and URLs shown without the user and password they may carry.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit


def without_userinfo(url: str) -> str:
    """`url` without `user:password@`, for showing it; text that is no URL is left alone."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if "@" not in parts.netloc:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=host))
