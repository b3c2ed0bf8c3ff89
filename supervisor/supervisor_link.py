"""`SupervisorLink`: a Grove's calls of the `Supervisor` Ray actor, typed by its contract
(`SupervisorService`, through `RayProxy`), waited for as supervisor/ray_waits.py waits; and
joining the supervisor of this Ray, or making one.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable
from typing import Any, TypeVar

import ray

from grove.actors.ray_proxy import RayCall, RayProxy, unwrapped, waited
from grove.supervisor import bridge
from grove.supervisor.actor import NAMESPACE, SUPERVISOR_NAME, Supervisor, SupervisorSettings
from grove.supervisor.contract import SupervisorService
from grove.supervisor.errors import SupervisorError
from grove.supervisor.ray_waits import got

CALL_TIMEOUT_S = 60.0
SUPERVISOR_RESTART_WAIT_S = 120.0
# Calls the supervisor runs at once. Each step on the batch tier holds one until its batch
# ends (minutes, hours): Ray's default of 1,000 would leave a large fleet's other calls
# (stored steps, waits) queued behind them.
SUPERVISOR_CALLS_AT_ONCE = 100_000

Result = TypeVar("Result")


class SupervisorLink:
    """The supervisor behind `handle`: `service` is its contract to mypy, each method a call;
    `answer` waits for one. A Grove error raised there is raised here as itself; when the
    supervisor dies under a call, a call marked @repeatable waits for its restart and is
    made again, any other gets a clear SupervisorError, never a hang."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle
        proxy = RayProxy[SupervisorService](handle, SupervisorService, timeout_s=CALL_TIMEOUT_S)
        self.service: SupervisorService = proxy.call

    def answer(self, call: Awaitable[Result], timeout_s: float | None = None) -> Result:
        """`call`'s result (`timeout_s`: other than the call's own timeout)."""
        sent = waited(call) if timeout_s is None else waited(call).within(timeout_s)
        deadline = time.monotonic() + SUPERVISOR_RESTART_WAIT_S
        while True:
            try:
                result: Result = got(sent.ref(), sent.timeout_s)
                return result
            except (ray.exceptions.RayTaskError, ray.exceptions.RayActorError) as exc:
                raise_unless_repeatable(sent, exc, deadline)
            bridge.sleep(0.5)


def raise_unless_repeatable(call: RayCall[Any], exc: Exception, deadline: float) -> None:
    """After a supervisor call failed with `exc`: raise what its caller is to see (a Grove
    error as itself), or return when the call is to be repeated after the restart."""
    if isinstance(exc, ray.exceptions.RayTaskError):
        raise unwrapped(exc) from None
    if not call.repeatable:
        raise SupervisorError(
            f"the supervisor restarted during {call.name}; it may or may not have "
            "taken effect (check `grove agents`)"
        ) from exc
    if time.monotonic() > deadline:
        raise SupervisorError(
            f"the supervisor did not come back within {SUPERVISOR_RESTART_WAIT_S:g} s"
        ) from exc


def join_or_make_supervisor(settings: SupervisorSettings) -> tuple[Any, bool]:
    """The supervisor running in this Ray, joined (False), else one made with `settings`
    (True: its maker stops it at close, so the next Grove in this Ray starts its own)."""
    with contextlib.suppress(ValueError):
        return ray.get_actor(SUPERVISOR_NAME, namespace=NAMESPACE), False
    try:
        made = Supervisor.options(  # type: ignore[attr-defined]
            name=SUPERVISOR_NAME,
            namespace=NAMESPACE,
            max_restarts=-1,  # Ray starts it again; it recovers from the store
            max_task_retries=0,  # a call cut off by a restart is not replayed blindly
            max_concurrency=SUPERVISOR_CALLS_AT_ONCE,
        ).remote(settings)
    except ValueError:  # the name was taken after the look: another Grove made it
        return ray.get_actor(SUPERVISOR_NAME, namespace=NAMESPACE), False
    return made, True
