"""How often an open provider batch is asked whether it ended (`BatchPlan.poll_wait`): every
`poll_s` while it is young, then a tenth of its age, never more than `poll_max_s` apart."""

from __future__ import annotations

import pytest

from grove.supervisor.tiers.plan import BatchPlan

PLAN = BatchPlan(poll_s=1.0, poll_max_s=60.0)


@pytest.mark.parametrize("age_s", [0.0, 1.0, 5.0, 9.9])
def test_a_young_batch_is_asked_every_poll_s(age_s: float) -> None:
    """A batch of a few seconds is seen ended within `poll_s` of its end, not doubling away."""
    assert PLAN.poll_wait(age_s) == 1.0


@pytest.mark.parametrize(("age_s", "wait_s"), [(20.0, 2.0), (100.0, 10.0), (450.0, 45.0)])
def test_an_older_batch_is_asked_a_share_of_its_age_apart(age_s: float, wait_s: float) -> None:
    assert PLAN.poll_wait(age_s) == pytest.approx(wait_s)


def test_the_wait_never_passes_poll_max_s() -> None:
    assert PLAN.poll_wait(3600.0) == 60.0
    assert BatchPlan(poll_s=0.05, poll_max_s=0.2).poll_wait(100.0) == 0.2


def test_polls_follow_the_batch_as_it_ages() -> None:
    """Asked from its sending on, a batch that ends after 5 s is seen ended within a second,
    and one of an hour within a tenth of it (the polls' times, summed as a poller waits)."""
    for ends_at, latest in ((5.0, 6.0), (3600.0, 3960.0)):
        age = 0.0
        while age < ends_at:
            age += PLAN.poll_wait(age)
        assert ends_at <= age <= latest
