"""Keeping secrets out of text: every credential Grove loads is remembered here, and `mask`,
the one function all error text goes through, hides their exact values, key-shaped strings
and the `user:password@` of URLs.
"""

from __future__ import annotations

import re
import threading
from urllib.parse import urlsplit, urlunsplit

MASK = "***"
# Shorter values are too likely to be ordinary words to be hidden everywhere they occur.
MIN_SECRET_CHARS = 6
# Anthropic `sk-ant-...`, OpenAI `sk-...` / `rk-...`: hidden even when never loaded here.
_SK_KEY_SHAPE = re.compile(r"\b(?:sk|rk)-[A-Za-z0-9_*\-]{4,}")
_GOOGLE_KEY_SHAPE = re.compile(r"AIza[0-9A-Za-z_\-]{30,}")
_URL_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)[^/\s@]+@")

_lock = threading.Lock()
_secrets: set[str] = set()
_exact: re.Pattern[str] | None = None


def remember_secret(value: str | None) -> None:
    """From now on, `mask` hides `value` in this process (keys, URL passwords)."""
    global _exact
    if not value or len(value) < MIN_SECRET_CHARS or value in _secrets:
        return
    with _lock:
        _secrets.add(value)
        # Longest first, so a secret that contains another is hidden whole.
        ordered = sorted(_secrets, key=len, reverse=True)
        _exact = re.compile("|".join(re.escape(secret) for secret in ordered))


def mask(text: str) -> str:
    """`text` with every remembered secret, key-shaped string and URL user info hidden."""
    exact = _exact
    if exact is not None:
        text = exact.sub(MASK, text)
    text = _SK_KEY_SHAPE.sub("sk-" + MASK, text)
    text = _GOOGLE_KEY_SHAPE.sub(MASK, text)
    return _URL_USERINFO.sub(r"\g<scheme>", text)


def remember_url_secrets(url: str) -> None:
    """The user and password a URL carries, remembered as secrets."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return
    remember_secret(parts.password)
    remember_secret(parts.username)


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
