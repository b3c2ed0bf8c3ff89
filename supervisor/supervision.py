"""Host supervision, OTP style: a dead host is replaced and its agents are rebuilt from the
store on their next message, at most `max_restarts` times in `window_s` seconds.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

from grove.providers.plurals import counted


@dataclass(frozen=True, kw_only=True, slots=True)
class RestartPolicy:
    """At most `max_restarts` replacements of one host within `window_s` seconds."""

    max_restarts: int = 5
    window_s: float = 60.0


@dataclass(slots=True)
class RestartIntensity:
    """Counts one host's restarts; past the policy's intensity the failure escalates."""

    policy: RestartPolicy
    restarts: deque[float] = field(default_factory=deque)

    def allow(self, now: float | None = None) -> bool:
        """Record a restart if the policy still allows one; False means give up."""
        now = time.monotonic() if now is None else now
        while self.restarts and now - self.restarts[0] > self.policy.window_s:
            self.restarts.popleft()
        if len(self.restarts) >= self.policy.max_restarts:
            return False
        self.restarts.append(now)
        return True


def given_up_text(host_id: str, policy: RestartPolicy) -> str:
    return (
        f"Host {host_id} died {counted(policy.max_restarts + 1, 'time')} within "
        f"{policy.window_s:g} s; "
        "Grove stopped restarting it. Its agents cannot run until the cause is fixed "
        "(see `grove events` for the HostGivenUp event)."
    )
