"""How a Grove waits for an actor call's result: blocking in a plain call, or, in a call
supervisor/bridge.py runs for an asyncio caller, on that caller's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from typing import Any

import ray
from ray._raylet import _set_future_helper as set_future_result

from grove.supervisor import bridge


def got(ref: Any, timeout_s: float | None) -> Any:
    """An actor call's result: awaited by the caller's loop for an AsyncGrove, else waited
    for here (supervisor/bridge.py)."""
    if bridge.bridged():
        return bridge.awaited(awaitable_result(ref, timeout_s))
    return ray.get(ref, timeout=timeout_s)


def awaitable_result(ref: Any, timeout_s: float | None) -> asyncio.Future[Any]:
    """An actor call's result as a future of the running loop (TimeoutError after
    `timeout_s`), settled from Ray's callback: no thread-safe future, no task and no timer
    task between (an AsyncGrove fan-out has thousands in flight)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    expiry = None if timeout_s is None else loop.call_later(timeout_s, _expire, future)
    # Ray calls it on its own thread; it keeps `ref` alive until then.
    ref._on_completed(functools.partial(_completed, loop, future, expiry, ref))
    return future


def _completed(
    loop: asyncio.AbstractEventLoop,
    future: asyncio.Future[Any],
    expiry: asyncio.TimerHandle | None,
    _ref: Any,
    result: Any,
) -> None:
    with contextlib.suppress(RuntimeError):  # the loop has closed: nobody awaits it now
        loop.call_soon_threadsafe(_settle, future, expiry, result)


def _settle(future: asyncio.Future[Any], expiry: asyncio.TimerHandle | None, result: Any) -> None:
    """`result` (an exception object for a failed call) into `future`, as Ray's own
    futures take it."""
    if expiry is not None:
        expiry.cancel()
    set_future_result(result, py_future=future)  # nothing when the future is done


def _expire(future: asyncio.Future[Any]) -> None:
    if not future.done():
        future.set_exception(TimeoutError())
