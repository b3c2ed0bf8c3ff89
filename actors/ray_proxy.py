"""`RayProxy`: the one typed proxy over a Ray actor handle, for every Ray surface of Grove.

A contract Protocol types it (`RayProxy(handle, HostAPI).call` is a `HostAPI` to mypy), so no
method name travels as a string; each call has a timeout, a Grove error raised in the actor
is raised here as itself, and a dead actor is reported before its caller sees the error.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Generator
from typing import Any, Generic, TypeVar, cast

import ray

from grove.providers.errors import GroveError

Contract = TypeVar("Contract")
Result = TypeVar("Result")
Method = TypeVar("Method", bound=Callable[..., Any])

DEFAULT_TIMEOUT_S = 30.0
_TIMEOUT = "__ray_timeout_s__"
_REPEATABLE = "__ray_repeatable__"
_STREAMED = "__ray_streamed__"


def timeout(seconds: float | None) -> Callable[[Method], Method]:
    """Marks a contract method with its own timeout (None: it may take as long as it takes)."""

    def mark(method: Method) -> Method:
        setattr(method, _TIMEOUT, seconds)
        return method

    return mark


def repeatable(method: Method) -> Method:
    """Marks a contract method as safe to call again when the actor restarted under it."""
    setattr(method, _REPEATABLE, True)
    return method


def streamed(method: Method) -> Method:
    """Marks a contract method as a streaming generator in the actor (`num_returns="streaming"`):
    the proxy gives its items one by one."""
    setattr(method, _STREAMED, True)
    return method


def unwrapped(exc: BaseException) -> BaseException:
    """What a caller sees of a failed actor call: a Grove error raised in the actor as itself,
    anything else as Ray reported it."""
    if isinstance(exc, ray.exceptions.RayTaskError) and isinstance(exc.cause, GroveError):
        return exc.cause
    return exc


class RayCall(Generic[Result]):
    """One call of a contract method: awaited in an actor's loop (`await`), or started as a
    Ray reference (`ref`) for a caller that waits in its own way."""

    __slots__ = ("_args", "_kwargs", "_proxy", "name", "repeatable", "timeout_s")

    def __init__(
        self,
        proxy: RayProxy[Any],
        name: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        timeout_s: float | None,
        repeatable: bool,
    ) -> None:
        self._proxy = proxy
        self.name = name
        self._args = args
        self._kwargs = kwargs
        self.timeout_s = timeout_s
        self.repeatable = repeatable

    def ref(self) -> Any:
        """Sends the call; its Ray object reference."""
        return getattr(self._proxy.handle, self.name).remote(*self._args, **self._kwargs)

    def within(self, seconds: float | None) -> RayCall[Result]:
        """This call with another timeout."""
        self.timeout_s = seconds
        return self

    def __await__(self) -> Generator[Any, None, Result]:
        return self._proxy.awaited(self).__await__()


class RayStream(Generic[Result]):
    """The items of a streaming contract method, awaited one by one in an actor's loop, or
    taken as Ray references (`refs`) by a caller that waits in its own way."""

    def __init__(self, call: RayCall[Any]) -> None:
        self._call = call
        self._generator: Any = None

    def refs(self) -> Any:
        """Sends the call; Ray's generator of object references."""
        call = self._call
        method = getattr(call._proxy.handle, call.name)
        return method.options(num_returns="streaming").remote(*call._args, **call._kwargs)

    def __aiter__(self) -> AsyncIterator[Result]:
        return self._items()

    async def _items(self) -> AsyncIterator[Result]:
        generator = self.refs()
        proxy = self._call._proxy
        incarnation = proxy.incarnation
        while True:
            try:
                ref = await generator.__anext__()
            except StopAsyncIteration:
                return
            except BaseException as exc:
                raise await proxy.failed(exc, incarnation) from None
            yield await proxy.awaited(self._call, ref)


class RayProxy(Generic[Contract]):
    """A Ray actor handle behind its contract, made as `RayProxy[HostAPI](handle, HostAPI)`
    (mypy infers no type from a Protocol). `call` is the contract to mypy; at run time each
    of its methods sends one Ray call. When the actor dies under a call, `on_death` is
    told (with the incarnation the call went to: `replace` bumps it) and the caller gets
    `death_error`'s exception; without them, Ray's."""

    def __init__(
        self,
        handle: Any,
        contract: Any,
        *,
        timeout_s: float | None = DEFAULT_TIMEOUT_S,
        on_death: Callable[[RayProxy[Contract], int], Awaitable[None]] | None = None,
        death_error: Callable[[BaseException], Exception] | None = None,
    ) -> None:
        self.handle = handle
        self.contract = contract
        self.timeout_s = timeout_s
        self.incarnation = 0
        self.on_death = on_death
        self.death_error = death_error
        self.call = cast(Contract, _Methods(self))

    def replace(self, handle: Any) -> None:
        """The actor was replaced by another: calls from now on go to `handle`."""
        self.handle = handle
        self.incarnation += 1

    def method(self, name: str) -> Callable[..., RayCall[Any] | RayStream[Any]]:
        """The contract's method `name` as a sender of Ray calls (AttributeError when the
        contract has no such method: nothing outside it can be called)."""
        declared = getattr(self.contract, name)
        timeout_s = getattr(declared, _TIMEOUT, self.timeout_s)
        is_repeatable = getattr(declared, _REPEATABLE, False)
        is_streamed = getattr(declared, _STREAMED, False)

        def send(*args: Any, **kwargs: Any) -> RayCall[Any] | RayStream[Any]:
            call: RayCall[Any] = RayCall(self, name, args, kwargs, timeout_s, is_repeatable)
            return RayStream(call) if is_streamed else call

        return send

    async def awaited(self, call: RayCall[Result], ref: Any = None) -> Result:
        """The result of `call` (sent now unless `ref` is given), within its timeout."""
        incarnation = self.incarnation
        try:
            sent = call.ref() if ref is None else ref
            if call.timeout_s is None:
                return cast(Result, await sent)
            return cast(Result, await asyncio.wait_for(sent, call.timeout_s))
        except (ray.exceptions.RayTaskError, ray.exceptions.RayActorError) as exc:
            raise await self.failed(exc, incarnation) from None

    async def failed(self, exc: BaseException, incarnation: int) -> BaseException:
        """What the caller of a failed call sees; a dead actor is reported first."""
        if not isinstance(exc, ray.exceptions.RayActorError):
            return unwrapped(exc)
        if self.on_death is not None:
            await self.on_death(self, incarnation)
        if self.death_error is None:
            return exc
        error = self.death_error(exc)
        error.__cause__ = exc
        return error


class _Methods:
    """What `RayProxy.call` is at run time: each attribute a sender of the contract's method."""

    __slots__ = ("_proxy",)

    def __init__(self, proxy: RayProxy[Any]) -> None:
        self._proxy = proxy

    def __getattr__(self, name: str) -> Callable[..., RayCall[Any] | RayStream[Any]]:
        if name.startswith("_"):
            raise AttributeError(name)
        return self._proxy.method(name)


def waited(call: Awaitable[Result]) -> RayCall[Result]:
    """A contract method's call, typed by mypy as the coroutine the contract declares, as
    the `RayCall` it is at run time (for a caller that waits outside an event loop)."""
    if not isinstance(call, RayCall):
        raise TypeError(f"not a call through a RayProxy: {call!r}")
    return call


def stream_of(items: AsyncIterator[Result]) -> RayStream[Result]:
    """A streaming contract method's items, as the `RayStream` they are at run time."""
    if not isinstance(items, RayStream):
        raise TypeError(f"not a stream through a RayProxy: {items!r}")
    return items
