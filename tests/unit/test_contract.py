"""The host/supervisor contract (actors/contract.py): mypy checks each implementation against
its Protocol here; each call of it declares its own timeout or streams, and the Ray actor
offers every call of HostAPI as the async method the proxy expects."""

from __future__ import annotations

import inspect

import pytest

from grove.actors.contract import HostAPI, SupervisorAPI
from grove.actors.host.actor import AgentHost
from grove.actors.host.core import AgentHostCore
from grove.actors.ray_proxy import RayCall, RayProxy, RayStream
from grove.supervisor.actor import Supervisor

UNDECLARED = -1.0  # the proxy's default here: a call left with it declared no timeout


def host_api(host: AgentHostCore) -> HostAPI:
    """What mypy checks: a host's core offers all of HostAPI, as declared."""
    return host


def supervisor_api(supervisor: Supervisor) -> SupervisorAPI:
    """What mypy checks: the supervisor actor offers hosts all of SupervisorAPI, as declared."""
    return supervisor


def contract_methods(contract: type) -> list[str]:
    names = [name for name, _ in inspect.getmembers(contract, inspect.isfunction)]
    return [name for name in names if not name.startswith("_")]


@pytest.mark.parametrize("contract", [HostAPI, SupervisorAPI])
def test_each_call_declares_its_timeout(contract: type) -> None:
    proxy = RayProxy[object](None, contract, timeout_s=UNDECLARED)
    methods = contract_methods(contract)
    assert len(methods) > 10
    for name in methods:
        call = proxy.method(name)()  # made, not sent
        assert not isinstance(call, RayCall) or call.timeout_s != UNDECLARED, name


def test_the_host_actor_offers_each_call_as_the_proxy_sends_it() -> None:
    proxy = RayProxy[HostAPI](None, HostAPI)
    for name in contract_methods(HostAPI):
        method = getattr(AgentHost, name)
        if isinstance(proxy.method(name)(), RayStream):
            assert inspect.isasyncgenfunction(method), name
        else:
            assert inspect.iscoroutinefunction(method), name
