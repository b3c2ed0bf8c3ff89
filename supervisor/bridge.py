"""One implementation for `Grove` and `AsyncGrove`: Grove's methods wait only through the
functions here, which block in a plain call and, in a call `bridge` runs for an asyncio
caller, hand what they wait for to that caller's event loop (a greenlet switch, no thread).
asyncio is imported where a wait needs it: a sync client (`grove status`) that only asks
`bridged()` does without it.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import greenlet

if TYPE_CHECKING:
    from concurrent.futures import Future

T = TypeVar("T")
_END = object()


class _Bridged(greenlet.greenlet):  # type: ignore[misc]
    """A sync call run for an asyncio caller: its waits are awaited by the loop driving it."""


def bridged() -> bool:
    """Whether this code runs inside `bridge`, for an asyncio caller."""
    return isinstance(greenlet.getcurrent(), _Bridged)


def awaited(awaitable: Awaitable[T]) -> T:
    """The result of `awaitable`, awaited by the event loop that drives this bridged call
    (which is suspended meanwhile); its exception is raised here."""
    current = greenlet.getcurrent()
    if not isinstance(current, _Bridged):
        raise RuntimeError("awaited() outside a bridged call")
    result: T = current.parent.switch(awaitable)
    return result


async def bridge(function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """`function(*args, **kwargs)`, a sync call, run so that every wait inside it is
    awaited here: the caller's event loop goes on meanwhile."""
    call = _Bridged(function)
    step = call.switch(*args, **kwargs)
    while not call.dead:
        try:
            value = await step
        except BaseException as exc:  # the call sees what its wait raised, cancellation too
            step = call.throw(type(exc), exc, exc.__traceback__)
        else:
            step = call.switch(value)
    result: T = step
    return result


async def bridged_iterator(items: Iterator[T]) -> AsyncIterator[T]:
    """A sync iterator's items for `async for`, each step bridged."""
    try:
        while (item := await bridge(next, items, _END)) is not _END:
            yield item
    finally:
        close = getattr(items, "close", None)
        if close is not None:
            await bridge(close)


def run(awaitable: Awaitable[T]) -> T:
    """An awaitable's result: awaited by the caller's loop in a bridged call, else run on a
    loop of its own (never nested in a running one)."""
    if bridged():
        return awaited(awaitable)
    import asyncio

    return asyncio.run(_result(awaitable))


def waited(future: Future[T]) -> T:
    """A thread-safe future's result, set by another thread or another bridged call: awaited
    by the caller's loop in a bridged call (which goes on meanwhile), else waited for here."""
    if future.done() or not bridged():
        return future.result()
    import asyncio

    return awaited(asyncio.wrap_future(future))


async def _result(awaitable: Awaitable[T]) -> T:
    return await awaitable


def sleep(seconds: float) -> None:
    if bridged():
        import asyncio

        awaited(asyncio.sleep(seconds))
    else:
        time.sleep(seconds)
