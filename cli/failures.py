"""What a command that failed says in one line instead of a traceback: Grove's own errors as
they are, Ray's errors and timeouts named with what gave out (masked: they may quote a key).
"""

from __future__ import annotations

import sys

from grove.providers.errors import GroveError
from grove.providers.secrets import mask

EXIT_FAILED = 1  # what a GroveError ends a command with, and so a Ray error or a timeout too
DOCTOR = "`grove doctor` checks Ray and the setup"


def first_line(exc: BaseException) -> str:
    """`exc`'s text up to its first line break (Ray's go on with a remote traceback)."""
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def failure_line(exc: BaseException) -> str | None:
    """The one line that tells a command's user what failed, or None for an error that is a
    bug (its traceback is what shows it)."""
    if "ray" in sys.modules:  # only then can a Ray error have been raised
        from ray.exceptions import RayTaskError

        if isinstance(exc, RayTaskError) and isinstance(exc.cause, GroveError):
            exc = exc.cause  # a Grove error raised in an actor: its sentence, not Ray's report
    if isinstance(exc, GroveError):
        return str(exc)  # masked when it was made
    text = failure_text(exc)
    return None if text is None else mask(text)


def failure_text(exc: BaseException) -> str | None:
    """What gave out, for a Ray error or a timeout; None for anything else."""
    if "ray" in sys.modules:
        from ray.exceptions import RayActorError, RayError, RayTaskError

        if isinstance(exc, RayTaskError):  # first: it is an instance of its cause's class too
            cause = exc.cause
            reason = f"{type(cause).__name__}: {first_line(cause)}" if cause else first_line(exc)
            return f"a call to a Grove actor failed ({reason})"
        if isinstance(exc, RayActorError):
            return f"a Grove actor died or cannot be reached ({first_line(exc)}); {DOCTOR}"
        if isinstance(exc, RayError) and not isinstance(exc, TimeoutError):
            return f"Ray failed: {type(exc).__name__}: {first_line(exc)}"
    if isinstance(exc, TimeoutError):  # ray.get's GetTimeoutError too
        return (
            f"the supervisor or an agent host did not answer in time ({first_line(exc)}); {DOCTOR}"
        )
    return None
