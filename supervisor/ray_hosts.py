"""`RayHosts`: the supervisor's hosts as Ray actors, each behind its contract (`RayProxy[HostAPI]`):
started spread over the nodes, pinged, and replaced once when one dies. No turn logic here.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import Awaitable, Callable, Collection, Coroutine
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from grove.actors.contract import HOST_CALL_TIMEOUT_S, HostAPI
from grove.actors.host.actor import AgentHostActor
from grove.actors.host.settings import HostSettings
from grove.actors.ray_proxy import RayProxy, waited
from grove.supervisor.errors import HostDiedError

HOST_PING_INTERVAL_S = 1.0
HOST_PING_TIMEOUT_S = 10.0
TELEMETRY_FLUSH_TIMEOUT_S = 30.0
PID_PING_TIMEOUT_S = 5.0

# What is told of a dead host: its id, its contract, and how to replace it.
HostDeath = Callable[[str, HostAPI, Callable[[], Awaitable[None]]], Awaitable[None]]


class RayHosts:
    """The hosts of one supervisor actor. `died` is told of each death once (however many
    callers noticed it) and replaces the host when it allows it; `background` runs a task the
    supervisor keeps (a replacement that died too is reported again through it)."""

    def __init__(
        self,
        settings: HostSettings,
        count: int,
        namespace: str,
        died: HostDeath,
        background: Callable[[Coroutine[Any, Any, None]], None],
    ) -> None:
        self._settings = settings
        self._namespace = namespace
        self._died = died
        self._background = background
        self._run_id = secrets.token_hex(3)
        self._nodes: dict[str, str] = {}  # host id -> the Ray node it was placed on
        self._death_lock = asyncio.Lock()
        # Every host, by id: the shared ones, then those of an agent's own.
        self.proxies: dict[str, RayProxy[HostAPI]] = {}
        for index in range(count):
            self._add(f"host-{index}")
        self.shared: dict[str, HostAPI] = {host_id: p.call for host_id, p in self.proxies.items()}

    def spawn(self, uuid: str) -> tuple[str, HostAPI]:
        """A host process of the agent's own (`isolation = "process"`): its id and contract."""
        host_id = f"solo-{uuid}"
        return host_id, self._add(host_id).call

    def handle(self, host_id: str) -> Any:
        """The host's Ray actor handle, for a caller that streams and awaits its turns."""
        return self.proxies[host_id].handle

    async def pings(self) -> list[dict[str, Any]]:
        """Every host's ping, once all have started (a host that failed to start raises)."""
        return list(
            await asyncio.gather(*(waited(p.call.ping()).ref() for p in self.proxies.values()))
        )

    async def pids(self, given_up: Collection[str]) -> dict[str, int]:
        """The process id of each live host that answers within a few seconds."""
        pids = {}
        for host_id, proxy in self.proxies.items():
            if host_id not in given_up:
                with contextlib.suppress(ray.exceptions.RayError, TimeoutError):
                    ping = await asyncio.wait_for(
                        waited(proxy.call.ping()).ref(), PID_PING_TIMEOUT_S
                    )
                    pids[host_id] = ping["pid"]
        return pids

    async def flush_telemetry(self, given_up: Collection[str]) -> None:
        """Each live host exports the spans it has ended (one that fails is passed over)."""
        live = [p for host_id, p in self.proxies.items() if host_id not in given_up]
        await asyncio.gather(
            *(
                asyncio.wait_for(waited(p.call.flush_telemetry()).ref(), TELEMETRY_FLUSH_TIMEOUT_S)
                for p in live
            ),
            return_exceptions=True,
        )

    async def watch(
        self, given_up: Collection[str], slow: Callable[[str, BaseException], None]
    ) -> None:
        """Every second, ping each host; a dead one is replaced, a slow one told to `slow`
        (supervision never dies from one failed step)."""
        while True:
            await asyncio.sleep(HOST_PING_INTERVAL_S)
            for host_id, proxy in list(self.proxies.items()):
                if host_id in given_up:
                    continue
                incarnation = proxy.incarnation
                try:
                    await asyncio.wait_for(waited(proxy.call.ping()).ref(), HOST_PING_TIMEOUT_S)
                except ray.exceptions.RayActorError:
                    await self._host_died(host_id, proxy, incarnation)
                except (TimeoutError, ray.exceptions.RayError) as exc:
                    slow(host_id, exc)

    def _add(self, host_id: str) -> RayProxy[HostAPI]:
        """A new host actor behind its contract: when it dies under a call, it is replaced
        before the caller gets HostDiedError."""

        async def died(proxy: RayProxy[HostAPI], incarnation: int) -> None:
            await self._host_died(host_id, proxy, incarnation)

        def death_error(_: BaseException) -> Exception:
            return HostDiedError(
                f"host {host_id} died; its agents are rebuilt on their next message"
            )

        proxy = RayProxy[HostAPI](
            self._new_host(host_id), HostAPI, on_death=died, death_error=death_error
        )
        self.proxies[host_id] = proxy
        return proxy

    async def _host_died(self, host_id: str, proxy: RayProxy[HostAPI], incarnation: int) -> None:
        """Tell of a dead host once, however many callers noticed its death."""
        async with self._death_lock:
            if proxy.incarnation != incarnation:
                return  # already replaced

            async def replace() -> None:
                proxy.replace(self._new_host(host_id, proxy.incarnation + 1))
                await asyncio.wait_for(waited(proxy.call.ping()).ref(), HOST_CALL_TIMEOUT_S * 2)

            try:
                await self._died(host_id, proxy.call, replace)
            except (TimeoutError, ray.exceptions.RayError):
                # The replacement died too: that counts as the next death of this host.
                self._background(self._host_died(host_id, proxy, proxy.incarnation))

    def _new_host(self, host_id: str, incarnation: int = 0) -> Any:
        # A name of this supervisor's own: after a restart, the old hosts' names may linger.
        name = f"grove-{host_id}-{self._run_id}-{incarnation}"
        return AgentHostActor.options(
            name=name,
            namespace=self._namespace,
            scheduling_strategy=self._spread(host_id),
        ).remote(host_id, self._settings, ray.get_runtime_context().current_actor)

    def _spread(self, host_id: str) -> NodeAffinitySchedulingStrategy:
        """The live node with the fewest of this supervisor's hosts (Ray's own "SPREAD" is
        best effort and often puts two hosts on one node). Soft: if that node goes before the
        host starts, Ray places it elsewhere."""
        self._nodes.pop(host_id, None)
        nodes: list[dict[str, Any]] = ray.nodes()  # type: ignore[no-untyped-call]
        alive = sorted(node["NodeID"] for node in nodes if node["Alive"])
        placed = list(self._nodes.values())
        node_id = min(alive, key=placed.count)
        self._nodes[host_id] = node_id
        return NodeAffinitySchedulingStrategy(node_id, soft=True)
