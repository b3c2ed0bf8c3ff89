"""The supervisor actor against what is asked of it: `SupervisorService` (a Grove's calls,
supervisor/contract.py) and `SupervisorAPI` (its hosts', actors/contract.py). mypy checks the
assignment below; the tests check that its surface (the actor is a GroveSurface with no method
of its own) offers each call as declared, by its name, parameters and kind (a coroutine or
not), since Ray finds the method by its name."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest

from grove.actors.contract import SupervisorAPI
from grove.supervisor.actor import Supervisor
from grove.supervisor.contract import SupervisorService
from grove.supervisor.core.grove_surface import GroveSurface


def grove_side(supervisor: Supervisor) -> SupervisorService:
    """What mypy checks: the actor is all a Grove asks of it, as declared."""
    return supervisor


def parameters(method: Callable[..., Any]) -> list[str]:
    """Its parameters' names, without the one Ray's tracing adds to an actor's methods."""
    names = inspect.signature(method).parameters
    return [name for name in names if name != "_ray_trace_ctx"]


def declared(contract: type) -> list[str]:
    return [
        name
        for name, _ in inspect.getmembers(contract, inspect.isfunction)
        if not name.startswith("_")
    ]


@pytest.mark.parametrize("contract", [SupervisorService, SupervisorAPI])
def test_the_actor_offers_each_call_of_its_contracts_as_declared(contract: type) -> None:
    names = declared(contract)
    assert len(names) > 10
    for name in names:
        wanted = getattr(contract, name)
        offered = getattr(GroveSurface, name)
        assert parameters(offered) == parameters(wanted), name
        coroutine = inspect.iscoroutinefunction
        assert coroutine(offered) == coroutine(wanted), name


def test_a_call_missing_from_the_actor_is_found() -> None:
    class Narrower(SupervisorService):
        async def vanished(self, uuid: str) -> None: ...

    assert "vanished" in declared(Narrower)
    assert not hasattr(GroveSurface, "vanished")
