"""Tests of providers/retry.py: the servers' retry hints and the jittered backoff.

Pure functions: headers are built with httpx.Headers, no request is made.
"""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path

import pytest
from httpx import Headers
from hypothesis import given
from hypothesis import strategies as st

from grove.providers.retry import (
    MAX_HONOURED_RETRY_AFTER_S,
    RetryPolicy,
    parse_duration,
    retry_after_from_headers,
)
from grove.supervisor.config import load_settings
from tests.unit.settings_files import refused


def hint(**headers: str) -> float | None:
    """Headers as they arrive off the wire: bytes, here UTF-8."""
    raw = {name.replace("_", "-").encode(): value.encode() for name, value in headers.items()}
    return retry_after_from_headers(Headers(raw))


def spread_limit(hinted: float) -> float:
    """The documented spread added to a server's hint: at most 0.25 s, less for short hints."""
    return min(0.25, hinted * 0.1 + 0.05)


# --- retry hints --------------------------------------------------------------------------


def test_retry_after_ms_beats_retry_after() -> None:
    assert hint(retry_after_ms="1500", retry_after="30") == 1.5
    assert hint(retry_after_ms="250.5") == pytest.approx(0.2505)


def test_retry_after_in_seconds() -> None:
    assert hint(retry_after="7") == 7.0
    assert hint(retry_after="0.5") == 0.5
    assert hint(retry_after="0") == 0.0
    assert hint(retry_after="-3") == 0.0
    assert hint(retry_after_ms="-3") == 0.0


def test_header_names_are_case_insensitive() -> None:
    assert retry_after_from_headers(Headers({"Retry-After-Ms": "20"})) == 0.02
    assert retry_after_from_headers(Headers({"RETRY-AFTER": "4"})) == 4.0


def test_retry_after_as_an_http_date() -> None:
    future = datetime.now(UTC) + timedelta(seconds=30)
    value = hint(retry_after=format_datetime(future, usegmt=True))
    assert value is not None
    assert 27.0 <= value <= 31.0
    past = datetime.now(UTC) - timedelta(hours=1)
    assert hint(retry_after=format_datetime(past, usegmt=True)) == 0.0


@pytest.mark.parametrize("garbage", ["soon", "", "1,5", "12s", "nan", "inf", "-inf", "0x10"])
def test_garbage_hints_are_ignored(garbage: str) -> None:
    assert hint(retry_after=garbage) is None
    # a garbage retry-after-ms falls back to retry-after
    assert hint(retry_after_ms=garbage, retry_after="2") == 2.0


def test_no_hint_at_all() -> None:
    assert retry_after_from_headers(Headers()) is None
    assert hint(content_type="application/json") is None


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("1.5s", 1.5), ("0s", 0.0), ("30s", 30.0), ("0.000001s", 0.000001), ("-2s", 0.0)],
)
def test_gemini_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["1.5", "s", "", "1.5ms", "abc s", "1m", "nans", "infs"])
def test_bad_gemini_durations_are_ignored(text: str) -> None:
    assert parse_duration(text) is None


@given(text=st.text(max_size=12))
def test_hint_parsers_never_raise_and_never_go_negative(text: str) -> None:
    for value in (parse_duration(text), hint(retry_after=text), hint(retry_after_ms=text)):
        assert value is None or (math.isfinite(value) and value >= 0.0)


# --- delays -------------------------------------------------------------------------------


def test_delay_honours_the_hint_within_the_documented_spread() -> None:
    policy = RetryPolicy()
    for hinted in (0.0, 0.1, 1.5, 10.0, 100.0):
        delays = [policy.delay(1, hinted) for _ in range(200)]
        assert all(hinted <= delay <= hinted + spread_limit(hinted) for delay in delays)
        assert len(set(delays)) > 1, "the spread is random"


def test_a_hint_beyond_the_cap_is_cut_to_the_cap() -> None:
    delay = RetryPolicy().delay(1, 10_000.0)
    assert MAX_HONOURED_RETRY_AFTER_S <= delay <= MAX_HONOURED_RETRY_AFTER_S + 0.25


def test_backoff_grows_exponentially_up_to_the_cap() -> None:
    policy = RetryPolicy(base_delay_s=0.5, max_delay_s=4.0)
    random.seed(11)
    for attempt, ceiling in [(1, 0.5), (2, 1.0), (3, 2.0), (4, 4.0), (5, 4.0), (30, 4.0)]:
        delays = [policy.delay(attempt) for _ in range(200)]
        assert all(ceiling / 2 <= delay <= ceiling for delay in delays), attempt
        assert max(delays) > ceiling * 0.9, "the whole jitter range is used"
        assert min(delays) < ceiling * 0.6


def test_a_huge_attempt_number_stays_at_the_cap() -> None:
    policy = RetryPolicy(max_delay_s=3.0)
    assert 1.5 <= policy.delay(5_000) <= 3.0


@given(
    attempt=st.integers(1, 10_000),
    retry_after=st.one_of(st.none(), st.floats(allow_nan=False)),
    base=st.floats(0.0, 10.0),
    cap=st.floats(0.0, 600.0),
)
def test_delay_is_never_negative_nor_beyond_its_bound(
    attempt: int, retry_after: float | None, base: float, cap: float
) -> None:
    policy = RetryPolicy(base_delay_s=base, max_delay_s=cap)
    delay = policy.delay(attempt, retry_after)
    hinted = 0.0 if retry_after is None else min(max(retry_after, 0.0), MAX_HONOURED_RETRY_AFTER_S)
    assert 0.0 <= delay <= max(cap, hinted + 0.25)
    if retry_after is not None:
        assert delay >= hinted


# --- [providers.retry] ------------------------------------------------------------------------


def test_the_retry_settings_make_the_policy_and_refuse_wrong_values_by_name(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config = tmp_path / "config.toml"
    monkeypatch.setenv("GROVE_CONFIG_FILE", str(config))
    assert load_settings().providers.retry.policy() == RetryPolicy()  # absent: the defaults
    for table, problem in (
        ("attempts = 0", "providers.retry.attempts: Input should be greater than or equal to 1"),
        ("attempts = 21", "providers.retry.attempts: Input should be less than or equal to 20"),
        ("attempts = 1.5", "providers.retry.attempts: Input should be a valid integer"),
        ("base_delay_s = 0", "providers.retry.base_delay_s: Input should be greater than 0"),
        ("base_delay_s = nan", "providers.retry.base_delay_s: Input should be a finite number"),
        ("max_delay_s = 601", "providers.retry.max_delay_s: Input should be less than or equal"),
        (
            "base_delay_s = 2\nmax_delay_s = 1",
            "providers.retry: Value error, base_delay_s (2) is more than max_delay_s (1)",
        ),
        ("tries = 3", "providers.retry.tries: Extra inputs are not permitted"),
    ):
        assert problem in refused(config, f"[providers.retry]\n{table}\n")
    config.write_text("[providers.retry]\nattempts = 3\nbase_delay_s = 0.01\n")
    fast = RetryPolicy(max_attempts=3, base_delay_s=0.01, max_delay_s=30.0)
    assert load_settings().providers.retry.policy() == fast
    monkeypatch.setenv("GROVE_PROVIDERS__RETRY__MAX_DELAY_S", "0.05")
    monkeypatch.setenv("GROVE_PROVIDERS__RETRY__ATTEMPTS", "2")
    fast = RetryPolicy(max_attempts=2, base_delay_s=0.01, max_delay_s=0.05)
    assert load_settings().providers.retry.policy() == fast  # the environment wins
