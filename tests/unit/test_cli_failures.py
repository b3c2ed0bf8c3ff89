"""The one line a command prints for a Grove error, a Ray error or a timeout (cli/failures.py),
from Ray's own exception classes; a bug gets no line, so its traceback shows.
"""

from __future__ import annotations

import pytest
from ray.exceptions import (
    ActorDiedError,
    GetTimeoutError,
    ObjectLostError,
    RayTaskError,
)

from grove.cli.failures import failure_line
from grove.supervisor.errors import CommandError

REMOTE_TRACEBACK = 'Traceback (most recent call last):\n  File "x.py", line 1\nValueError: bad'


def raised_in_actor(cause: Exception) -> Exception:
    """What `ray.get` raises for `cause` raised in an actor's call: of its class and Ray's."""
    error = RayTaskError("Supervisor.fork", REMOTE_TRACEBACK, cause)  # type: ignore[no-untyped-call]
    dual: Exception = error.as_instanceof_cause()  # type: ignore[no-untyped-call]
    return dual


@pytest.mark.parametrize(
    ("error", "line"),
    [
        (
            GetTimeoutError("Get timed out: some object(s) not ready."),
            "the supervisor or an agent host did not answer in time (Get timed out: some "
            "object(s) not ready.); `grove doctor` checks Ray and the setup",
        ),
        (
            TimeoutError(),
            "the supervisor or an agent host did not answer in time (TimeoutError); "
            "`grove doctor` checks Ray and the setup",
        ),
        (
            ActorDiedError(),
            "a Grove actor died or cannot be reached (The actor died unexpectedly before "
            "finishing this task.); `grove doctor` checks Ray and the setup",
        ),
        (
            raised_in_actor(ValueError("bad value\nmore")),
            "a call to a Grove actor failed (ValueError: bad value)",
        ),
        (
            raised_in_actor(CommandError("Agent x is dead")),
            "Agent x is dead",
        ),
        (
            ObjectLostError("ab" * 14, None, "call"),
            "Ray failed: ObjectLostError: Failed to retrieve object "
            + "ab" * 14
            + ". The ObjectRef was created at: call",
        ),
        (
            CommandError("no MCP server named x is configured"),
            "no MCP server named x is configured",
        ),
    ],
)
def test_grove_and_ray_errors_and_timeouts_are_one_line(error: Exception, line: str) -> None:
    assert failure_line(error) == line


def test_a_key_in_a_ray_error_is_masked() -> None:
    error = GetTimeoutError("waited on sk-ant-api03-abcdefghijklmnop")
    shown = failure_line(error)
    assert shown is not None and "abcdefghijklmnop" not in shown


@pytest.mark.parametrize("bug", [ValueError("x"), KeyError("y"), AttributeError("z")])
def test_a_bug_gets_no_line_so_its_traceback_shows(bug: Exception) -> None:
    assert failure_line(bug) is None
