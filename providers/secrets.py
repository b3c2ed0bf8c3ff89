"""Keeping secrets out of text: every credential Grove loads is remembered here, and `mask`,
the one function all error text goes through, hides their exact values, key-shaped strings
and the `user:password@` of URLs.
"""

from __future__ import annotations

import base64
import re
import threading
from urllib.parse import unquote, urlsplit, urlunsplit

MASK = "***"
# Shorter values are too likely to be ordinary words to be hidden everywhere they occur.
MIN_SECRET_CHARS = 8
# Anthropic `sk-ant-...`, OpenAI `sk-...` / `rk-...`: hidden even when never loaded here.
_SK_KEY_SHAPE = re.compile(r"\b(?:sk|rk)-[A-Za-z0-9_*\-]{4,}")
_GOOGLE_KEY_SHAPE = re.compile(r"AIza[0-9A-Za-z_\-]{30,}")
_URL_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)[^/\s@]+@")


class Secrets:
    """A set of secret values and the masking that hides them; one per process holds what
    Grove loaded (`remember_secret`, `mask`), tests may make their own."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: set[str] = set()
        self._exact: re.Pattern[str] | None = None

    def remember(self, value: str | None) -> None:
        """From now on, `mask` hides `value` (too short a value is left: see MIN_SECRET_CHARS)."""
        if not value or len(value) < MIN_SECRET_CHARS or value in self._values:
            return
        with self._lock:
            self._values.add(value)
            # Longest first, so a secret that contains another is hidden whole.
            ordered = sorted(self._values, key=len, reverse=True)
            self._exact = re.compile("|".join(re.escape(secret) for secret in ordered))

    def mask(self, text: str) -> str:
        """`text` with every remembered secret, key-shaped string and URL user info hidden."""
        exact = self._exact
        if exact is not None:
            text = exact.sub(MASK, text)
        text = _SK_KEY_SHAPE.sub("sk-" + MASK, text)
        text = _GOOGLE_KEY_SHAPE.sub(MASK, text)
        return _URL_USERINFO.sub(r"\g<scheme>", text)


_LOADED = Secrets()
remember_secret = _LOADED.remember
mask = _LOADED.mask


def remember_url_secrets(url: str) -> None:
    """The user and password a URL carries, remembered as secrets, and the `Authorization:
    Basic` value an HTTP client makes of them (a server may echo that back)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return
    remember_secret(parts.password)
    remember_secret(parts.username)
    if parts.password is not None:
        for user, password in {
            (parts.username or "", parts.password),
            (unquote(parts.username or ""), unquote(parts.password)),
        }:
            remember_secret(base64.b64encode(f"{user}:{password}".encode()).decode())


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
