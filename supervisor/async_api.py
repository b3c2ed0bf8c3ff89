"""`AsyncGrove`: every `Grove` method as a coroutine (or an async iterator, or for a turn an
`AsyncTurn`), made from `Grove`'s own methods with their signatures and run by
supervisor/bridge.py, so both share one implementation (`ask` is its own `send` then `result`,
a turn's result awaited on the caller's loop).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Generator, Iterator
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

import ray

from grove.providers.base import DEFAULT_OUTPUT_RETRIES
from grove.supervisor.api import Grove
from grove.supervisor.api_turn import Turn
from grove.supervisor.bridge import bridge, bridged_iterator
from grove.supervisor.errors import TurnTimeout

if TYPE_CHECKING:
    from grove.actors.turn_result import TurnResult
    from grove.supervisor.contract import GroveAPI
    from grove.supervisor.output_types import OutputTypeLike

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


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


def twin(
    method: Callable[Concatenate[Grove, P], R],
) -> Callable[Concatenate[AsyncGrove, P], Coroutine[Any, Any, R]]:
    """The async twin of Grove's `method`, with its signature: the same method of the wrapped
    Grove (or RemoteGrove), its waits awaited on the caller's loop."""
    name = method.__name__

    async def call(self: AsyncGrove, /, *args: P.args, **kwargs: P.kwargs) -> R:
        result: R = await bridge(getattr(self.grove, name), *args, **kwargs)
        return result

    return functools.wraps(method)(call)


def iterator_twin(
    method: Callable[Concatenate[Grove, P], Iterator[T]],
) -> Callable[Concatenate[AsyncGrove, P], AsyncIterator[T]]:
    """The async twin of Grove's iterator `method`: its items for `async for`."""
    name = method.__name__

    def iterate(self: AsyncGrove, /, *args: P.args, **kwargs: P.kwargs) -> AsyncIterator[T]:
        items: Iterator[T] = getattr(self.grove, name)(*args, **kwargs)
        return bridged_iterator(items)

    return functools.wraps(method)(iterate)


def turn_twin(
    method: Callable[Concatenate[Grove, P], Turn | None],
) -> Callable[Concatenate[AsyncGrove, P], AsyncTurn]:
    """The async twin of Grove's `method` that starts a turn: an AsyncTurn (iterate it, or
    await it), started on first use."""
    name = method.__name__

    def turn(self: AsyncGrove, /, *args: P.args, **kwargs: P.kwargs) -> AsyncTurn:
        return AsyncTurn(functools.partial(bridge, getattr(self.grove, name), *args, **kwargs))

    return functools.wraps(method)(turn)


class AsyncGrove:
    """`async with AsyncGrove(simulate=True) as grove: await grove.ask(...)`: Grove's API for
    asyncio programs (FastAPI, Jupyter), never blocking the caller's loop while it waits.
    Given a `Grove`, or a service's `RemoteGrove` (`AsyncGrove(RemoteGrove.running())`), it
    runs on that one."""

    def __init__(self, grove: GroveAPI | None = None, **options: Any) -> None:
        """`grove`: a Grove or a RemoteGrove; `options` are Grove's (settings, simulate, hosts,
        endpoint), without `grove`."""
        if grove is not None and options:
            raise TypeError("give AsyncGrove a Grove or Grove's options, not both")
        self.grove: GroveAPI = grove if grove is not None else Grove(**options)

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
        turn = self.send(agent, text, output_type=output_type, output_retries=output_retries)
        return await turn.result(timeout_s)

    ask.__doc__ = Grove.ask.__doc__

    start = twin(Grove.start)
    flush_telemetry = twin(Grove.flush_telemetry)
    close = twin(Grove.close)
    create_root = twin(Grove.create_root)
    send = turn_twin(Grove.send)
    set_approver = twin(Grove.set_approver)
    attend_approvals = twin(Grove.attend_approvals)
    answer_approval = twin(Grove.answer_approval)
    command_turn = turn_twin(Grove.command_turn)
    fork_many = twin(Grove.fork_many)
    fork = twin(Grove.fork)
    worktrees = twin(Grove.worktrees)
    models = twin(Grove.models)
    release_caches = twin(Grove.release_caches)
    seed = twin(Grove.seed)
    answered = twin(Grove.answered)
    run_batch = iterator_twin(Grove.run_batch)
    set_todo = twin(Grove.set_todo)
    advice = twin(Grove.advice)
    wait_reviews = twin(Grove.wait_reviews)
    wait_any = twin(Grove.wait_any)
    route_mail = twin(Grove.route_mail)
    dispatch = twin(Grove.dispatch)
    focus = twin(Grove.focus)
    agent = twin(Grove.agent)
    history = twin(Grove.history)
    streaming = twin(Grove.streaming)
    turns_in_flight = twin(Grove.turns_in_flight)
    watch = iterator_twin(Grove.watch)
    cancel = twin(Grove.cancel)
    wait_turn = twin(Grove.wait_turn)
    host_pids = twin(Grove.host_pids)
    provider_identity = twin(Grove.provider_identity)
