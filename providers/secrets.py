"""Keeping secrets out of text: every credential Grove loads is remembered here, and `mask`,
the one function all error text, tool calls and results and model text go through before they
are stored, logged or shown, hides their exact values, key-shaped strings, the `user:password@`
of URLs and Authorization values; `StreamMask` does the same for text that comes in pieces.
"""

from __future__ import annotations

import base64
import re
import threading
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

import re2

MASK = "***"
# Shorter values are too likely to be ordinary words to be hidden everywhere they occur.
MIN_SECRET_CHARS = 8
# What a credential looks like even when it was never loaded here, each a named group that says
# what replaces it. Anthropic `sk-ant-...`, OpenAI `sk-proj-...`, `sk-...`, `rk-...`; Google
# `AIza...`; GitHub `ghp_...` (and gho_, ghu_, ghs_, ghr_), `github_pat_...`; Slack `xox?-...`;
# AWS access key ids; a URL's user info; an Authorization (or API key) header's value; a
# Bearer, Basic or Token credential (with a digit or a sign in it: not a word of prose).
_TOKEN = r"[A-Za-z0-9._~+/=\-]"
_SHAPES = (
    r"(?P<sk>\b(?:sk|rk)-[A-Za-z0-9_*\-]{4,})",
    r"(?P<key>AIza[0-9A-Za-z_\-]{30,}|\b(?:gh[pousr]_[A-Za-z0-9]{20,}"
    r"|github_pat_[A-Za-z0-9_]{20,}|xox[abposr]-[A-Za-z0-9\-]{10,}|(?:AKIA|ASIA)[0-9A-Z]{16}\b))",
    r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)[^/\s@]+@",
    r"(?P<header>\b(?:[Aa]uthorization|AUTHORIZATION|[Xx]-(?:[Gg]oog-)?[Aa]pi-[Kk]ey)[\"']?\s*[:=]"
    rf"\s*[\"']?(?:(?:[Bb]earer|Basic|Token)\s+)?){_TOKEN}{{8,}}",
    rf"(?P<label>\b(?:[Bb]earer|Basic|Token)\s+)(?=[A-Za-z]*[0-9._~+/=\-]){_TOKEN}{{8,}}",
)
# Text without one of these holds no match of the above (nor a remembered value): the fast
# path, one scan for them (factored by first letter, which `re` scans for quickly; RE2 for long
# text, where `re` would try each at every position), before the expression above is tried.
_SHAPE_STARTS = (
    r"[sr]k-|A(?:Iza|KIA|SIA|UTHORIZATION)|g(?:h[pousr]_|ithub_pat_)|xox|://|earer|Basic|Token"
    r"|uthorization|[Pp]i-"
)
# From this length on RE2 scans faster than `re` (a call's fixed cost, about 1.7 us, against
# `re`'s 45 ns a character): a reply's text, a tool result; a streamed word stays with `re`.
LONG_TEXT_CHARS = 40
# A piece of streamed text that ends in one of these holds back the word before it too: the
# credential that follows is masked with its label.
_LABEL_AT_END = re.compile(
    r"(?:\b(?:[Bb]earer|Basic|Token)|\b(?:[Aa]uthorization|AUTHORIZATION|[Xx]-(?:[Gg]oog-)?"
    r"[Aa]pi-[Kk]ey)[\"']?\s*[:=]\s*[\"']?)\s*\Z"
)
LABEL_LOOKBACK_CHARS = 48
_LABEL_LAST_CHARS = frozenset(":=\"'rcnN \t\n")
# What a match of _LABEL_AT_END ends in before its trailing whitespace: text that ends in none
# of these (most words that end in r, c or n) is not searched.
_LABEL_ENDINGS = ("earer", "Basic", "Token", ":", "=", '"', "'")
# Streamed text without a space for this long is shown anyway (no credential is this long).
MAX_HELD_CHARS = 2048


def _scans(values: list[str]) -> tuple[re.Pattern[str], Any]:
    """The fast path's scans, for short text and long (an RE2 pattern): whether text holds a
    remembered value or a shape's start."""
    expression = "|".join([*(re.escape(value) for value in values), _SHAPE_STARTS])
    options = re2.Options()
    options.never_capture = True
    options.log_errors = False
    return re.compile(expression), re2.compile(expression, options)


def _hidden(match: re.Match[str]) -> str:
    """What replaces one match of a Secrets pattern."""
    if match["sk"] is not None:
        return "sk-" + MASK
    for kept in ("scheme", "header", "label"):
        if match[kept] is not None:
            return match[kept] + (MASK if kept != "scheme" else "")
    return MASK  # an exact value, or a key of another shape


class Secrets:
    """A set of secret values and the masking that hides them; one per process holds what
    Grove loaded (`remember_secret`, `mask`), tests may make their own."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: set[str] = set()
        self._short_scan, self._long_scan = _scans([])
        self._pattern = re.compile("|".join(_SHAPES))  # one expression: exact values, shapes

    def remember(self, value: str | None) -> None:
        """From now on, `mask` hides `value` (too short a value is left: see MIN_SECRET_CHARS)."""
        if not value or len(value) < MIN_SECRET_CHARS or value in self._values:
            return
        with self._lock:
            self._values.add(value)
            # Longest first, so a secret that contains another is hidden whole.
            ordered = sorted(self._values, key=len, reverse=True)
            exact = "(?P<exact>" + "|".join(re.escape(secret) for secret in ordered) + ")"
            self._pattern = re.compile("|".join((exact, *_SHAPES)))
            self._short_scan, self._long_scan = _scans(ordered)

    def mask(self, text: str) -> str:
        """`text` with every remembered secret, key-shaped string, URL user info and
        Authorization value hidden."""
        scan = self._long_scan if len(text) > LONG_TEXT_CHARS else self._short_scan
        if scan.search(text) is None:
            return text
        return self._pattern.sub(_hidden, text)


class StreamMask:
    """Masking for text that comes in pieces (a reply's deltas): each piece is shown up to its
    last space, the word it ends in (and a label such as `Bearer` before it) held back until a
    later piece shows where it ends, so a key split between pieces is masked whole. `flush`
    gives what is held when the text ends."""

    def __init__(self, secrets: Secrets | None = None) -> None:
        self._mask = secrets.mask if secrets is not None else mask
        self._held = ""

    def feed(self, piece: str) -> str:
        text = self._held + piece if self._held else piece
        cut = max(text.rfind(" "), text.rfind("\n"), text.rfind("\t")) + 1
        # A label ends in one of these (before the space): only then is the regex tried.
        while (
            cut > 1
            and text[cut - 2] in _LABEL_LAST_CHARS
            and text[:cut].rstrip().endswith(_LABEL_ENDINGS)
        ):
            label = _LABEL_AT_END.search(text, max(0, cut - LABEL_LOOKBACK_CHARS), cut)
            if label is None:
                break
            cut = label.start()
        if len(text) - cut > MAX_HELD_CHARS:
            cut = len(text)
        self._held = text[cut:]
        return self._mask(text[:cut]) if cut else ""

    def flush(self) -> str:
        held, self._held = self._held, ""
        return self._mask(held) if held else ""


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
