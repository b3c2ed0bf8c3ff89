"""The host/supervisor contract (actors/contract.py): mypy checks each implementation against
its Protocol here, and each call of it declares its own timeout or streams."""

from __future__ import annotations

import inspect

import pytest

from grove.actors.contract import SupervisorAPI
from grove.actors.ray_proxy import RayCall, RayProxy
from grove.supervisor.remote import Supervisor

UNDECLARED = -1.0  # the proxy's default here: a call left with it declared no timeout


def supervisor_api(supervisor: Supervisor) -> SupervisorAPI:
    """What mypy checks: the supervisor actor offers hosts all of SupervisorAPI, as declared."""
    return supervisor


@pytest.mark.parametrize("contract", [SupervisorAPI])
def test_each_call_declares_its_timeout(contract: type) -> None:
    proxy = RayProxy[object](None, contract, timeout_s=UNDECLARED)
    names = [name for name, _ in inspect.getmembers(contract, inspect.isfunction)]
    methods = [name for name in names if not name.startswith("_")]
    assert len(methods) > 10
    for name in methods:
        call = proxy.method(name)()  # made, not sent
        assert not isinstance(call, RayCall) or call.timeout_s != UNDECLARED, name
