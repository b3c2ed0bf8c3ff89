"""The simulator's rate limiter: token buckets for requests and input tokens a minute, refilled
continuously, a request taken whole or not at all, and the wait it would need."""

from __future__ import annotations

from grove.providers.ratelimit import RateLimiter
from grove.simulator.openai.common import openai_duration


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_requests_a_minute_are_admitted_then_refused_with_the_wait() -> None:
    clock = Clock()
    limiter = RateLimiter(rpm=60, tpm=None, clock=clock)
    admitted = [limiter.admit(10) for _ in range(60)]
    assert all(a.allowed for a in admitted) and admitted[-1].requests is not None
    assert admitted[-1].requests.remaining == 0 and admitted[0].tokens is None
    refused = limiter.admit(10)
    assert not refused.allowed and abs(refused.retry_after - 1.0) < 1e-9  # one a second
    clock.now += 1.0
    assert limiter.admit(10).allowed


def test_tokens_a_minute_hold_a_request_whole_or_not_at_all() -> None:
    clock = Clock()
    limiter = RateLimiter(rpm=100, tpm=1_000, clock=clock)
    assert limiter.admit(900).allowed
    refused = limiter.admit(200)
    assert not refused.allowed and abs(refused.retry_after - 6.0) < 1e-9
    assert refused.requests is not None and refused.requests.remaining == 99  # nothing taken
    assert refused.tokens is not None and refused.tokens.remaining == 100
    # A request larger than the whole bucket waits for a full bucket, never forever.
    clock.now += 60
    assert limiter.admit(5_000).allowed


def test_openai_durations_read_as_the_headers_write_them() -> None:
    assert [openai_duration(s) for s in (0.02, 1.5, 6.0, 360.0)] == ["20ms", "1.5s", "6s", "6m0s"]
