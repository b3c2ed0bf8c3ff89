"""The supervisor's branch of Grove's error hierarchy: command, config, store and supervisor errors.

    GroveError                  (providers.errors)
     +-- CommandError           a command the user cannot run as asked: exact user-facing text
     +-- ConfigError            the config file or a GROVE_* variable cannot be used
     +-- StoreError             the store refused a write, holds a record it cannot read, or is down
     |    +-- NoStoreError      no store where the URL points (a reader never makes one)
     +-- SupervisorError        the control plane could not do its job (timeouts, lost leases...)
          +-- HostDiedError     an agent host died under a call (the supervisor replaces it)
          +-- TurnTimeout       a turn's result was waited for in vain (also a TimeoutError)

Provider errors live in providers.errors; no error text ever contains a secret.
"""

from __future__ import annotations

from grove.providers.errors import GroveError

BUDGET_EXHAUSTED = "Budget exhausted: "  # how a refusal for a spent budget begins


class CommandError(GroveError):
    """A command the user cannot run as asked; `text` (also `str()`) is shown to the user as is."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


class ConfigError(GroveError):
    """The config file or a GROVE_* variable cannot be used; the text says where and why."""


class StoreError(GroveError):
    """The store refused an operation (and changed nothing) or holds a record it cannot read."""


class NoStoreError(StoreError):
    """No store where the URL points, and the command only reads: none was made."""


class SupervisorError(GroveError):
    """The supervisor could not do what was asked: a wait timed out, a lease was lost..."""


class HostDiedError(SupervisorError):
    """An agent host died under a call; the supervisor has replaced it (or given up on it),
    and its agents are rebuilt on their next message."""


class TurnTimeout(SupervisorError, TimeoutError):
    """A turn had not ended when the wait for its result did: one text whether the `Grove` is
    local (Ray's or the loop's timeout) or a `RemoteGrove` (the service's wait said none)."""

    def __init__(self, agent: str, timeout_s: float) -> None:
        super().__init__(f"The turn of agent {agent} did not end within {timeout_s:g} s")
