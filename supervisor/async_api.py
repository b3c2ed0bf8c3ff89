"""`AsyncGrove`: every `Grove` method as a coroutine (or an async iterator), generated from
`Grove` itself and run by supervisor/bridge.py, so both share one implementation (`ask` is
its own `send` then `result`, a turn's result awaited on the caller's loop).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterator
from typing import TYPE_CHECKING, Any

import ray

from grove.providers.base import DEFAULT_OUTPUT_RETRIES
from grove.supervisor.api import Grove, Turn
from grove.supervisor.bridge import bridge, bridged_iterator
from grove.supervisor.errors import TurnTimeout

if TYPE_CHECKING:
    from grove.actors.agent import TurnResult
    from grove.supervisor.output_types import OutputTypeLike


class AsyncTurn:
    """A turn for asyncio, started on first use: `async for kind, text in grove.send(...)`,
    `await turn.result()`; `turn = await grove.send(...)` starts it at once."""

    __slots__ = ("_start", "_starting")  # a fan-out keeps thousands: no dict, no task each

    def __init__(self, start: Callable[[], Awaitable[Turn | Any]]) -> None:
        self._start: Callable[[], Awaitable[Turn | Any]] | None = start
        self._starting: asyncio.Future[Turn | Any] | None = None

    async def started(self) -> Turn | Any:
        """The sync turn underneath (None: a command that started none). The first caller
        starts it (no task of its own); any other meanwhile waits for that start."""
        starting = self._starting
        if starting is None or not starting.done():
            await self
            starting = self._starting
            assert starting is not None
        return starting.result()

    def __await__(self) -> Generator[Any, None, AsyncTurn | None]:
        starting = self._starting
        if starting is None:  # the first caller: started here, in its await
            starting = self._starting = asyncio.get_running_loop().create_future()
            start, self._start = self._start, None
            assert start is not None
            try:
                turn = yield from start().__await__()
            except asyncio.CancelledError:
                starting.cancel()
                raise
            except BaseException as exc:
                starting.set_exception(exc)
                starting.exception()  # retrieved: the caller sees it raised here
                raise
            starting.set_result(turn)
        elif starting.done():
            turn = starting.result()
        else:
            turn = yield from asyncio.shield(starting)
        return self if turn is not None else None

    @property
    def agent(self) -> str:
        """The agent whose turn this is (once started)."""
        if self._starting is None or not self._starting.done():
            raise RuntimeError("the turn has not started yet: await it first")
        turn = self._starting.result()
        assert turn is not None
        return turn.agent

    def __aiter__(self) -> AsyncIterator[tuple[str, str]]:
        return self._deltas()

    async def _deltas(self) -> AsyncIterator[tuple[str, str]]:
        turn = await self.started()
        if turn is not None:
            async for delta in bridged_iterator(iter(turn)):
                yield delta

    async def result(self, timeout_s: float = 3600.0) -> TurnResult:
        turn = await self.started()
        assert turn is not None, "a command that started no turn has no result"
        if isinstance(turn, Turn):  # most often awaited here, with no greenlet of its own
            waiting = turn.batched_result(timeout_s)
            if waiting is not None:
                try:
                    found = await waiting
                except ray.exceptions.RayActorError:
                    found = None  # the host died: `Turn.result` asks the supervisor
                except TimeoutError as exc:
                    raise TurnTimeout(turn.agent, timeout_s) from exc
                if found is not None:
                    return turn.typed(found)
        return await bridge(turn.result, timeout_s)  # what else `Turn.result` does


def kind_of(method: Callable[..., Any]) -> str:
    """How `method`'s twin hands back what it returns: "iterator" (an async iterator),
    "turn" (an AsyncTurn) or "value"."""
    returns = str(inspect.signature(method).return_annotation)
    if returns.startswith("Iterator["):
        return "iterator"
    return "turn" if returns.split(" | ")[0] == "Turn" else "value"


def public_methods() -> dict[str, Callable[..., Any]]:
    """Grove's public methods: what AsyncGrove has a twin of."""
    return {
        name: member
        for name, member in vars(Grove).items()
        if not name.startswith("_") and inspect.isfunction(member)
    }


def twin(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
    """The async twin of Grove's `method`: the same signature, calling the same method on
    the wrapped Grove with its waits awaited on the caller's loop; a coroutine, or an async
    iterator, or for a turn an AsyncTurn (iterate it, or await it)."""
    kind = kind_of(method)
    if kind == "iterator":

        def iterate(self: AsyncGrove, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            items: Iterator[Any] = getattr(self.grove, name)(*args, **kwargs)
            return bridged_iterator(items)

        return functools.wraps(method)(iterate)

    if kind == "turn":

        def turn(self: AsyncGrove, *args: Any, **kwargs: Any) -> AsyncTurn:
            return AsyncTurn(functools.partial(bridge, getattr(self.grove, name), *args, **kwargs))

        return functools.wraps(method)(turn)

    async def call(self: AsyncGrove, *args: Any, **kwargs: Any) -> Any:
        return await bridge(getattr(self.grove, name), *args, **kwargs)

    return functools.wraps(method)(call)


class AsyncGrove:
    """`async with AsyncGrove(simulate=True) as grove: await grove.ask(...)`: Grove's API for
    asyncio programs (FastAPI, Jupyter), never blocking the caller's loop while it waits.
    Given a `Grove`, or a service's `RemoteGrove` (`AsyncGrove(RemoteGrove.running())`), it
    runs on that one."""

    def __init__(self, grove: Grove | Any = None, **options: Any) -> None:
        """`grove`: a Grove or a RemoteGrove (server/ sits above this layer, hence Any);
        `options` are Grove's (settings, simulate, hosts, endpoint), without `grove`."""
        if grove is not None and options:
            raise TypeError("give AsyncGrove a Grove or Grove's options, not both")
        self.grove = grove if grove is not None else Grove(**options)

    async def __aenter__(self) -> AsyncGrove:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def ask(
        self,
        agent: str,
        text: str,
        timeout_s: float = 3600.0,
        *,
        output_type: OutputTypeLike | None = None,
        output_retries: int = DEFAULT_OUTPUT_RETRIES,
    ) -> TurnResult:
        # What `Grove.ask` is, `send` then `result`, of their twins: the result is awaited
        # on the loop (an AsyncTurn's), not in a bridged call kept for the whole turn.
        typed = {"output_type": output_type, "output_retries": output_retries}
        turn = await self.send(agent, text, **(typed if output_type is not None else {}))
        result: TurnResult = await turn.result(timeout_s)
        return result

    ask.__doc__ = Grove.ask.__doc__

    if TYPE_CHECKING:  # the other twins are made below, from Grove's own methods

        def __getattr__(self, name: str) -> Any: ...


for _name, _method in public_methods().items():
    if _name not in vars(AsyncGrove):
        setattr(AsyncGrove, _name, twin(_name, _method))
