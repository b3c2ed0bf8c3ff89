"""Ways to run a `Simulator`: in a background thread (`SimulatorThread`, for tests and
`grove run --simulate`) or in the foreground until interrupted (`run_forever`, `grove simulate`).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Protocol

from grove.providers.base import ProviderName
from grove.simulator.config import SimulatorConfig
from grove.simulator.server import Simulator

START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 10.0


class _Served(Protocol):
    @property
    def base_url(self) -> str: ...


def base_urls(simulator: _Served) -> dict[ProviderName, str]:
    """The base URL each Grove provider uses: the bare origin for all three, since Grove's
    wires send `/v1/messages`, `/v1/responses`, `/v1/chat/completions` and `/v1beta/...`.
    (The vendors' SDKs differ: the openai SDK wants `<origin>/v1`, the others the origin.)"""
    return {name: simulator.base_url for name in ("anthropic", "openai", "google")}


class SimulatorThread:
    """A `Simulator` on its own event loop in a daemon thread. Use as a context manager:
    entering starts it (raising what start raised), leaving stops it and joins the thread."""

    def __init__(self, config: SimulatorConfig | None = None) -> None:
        self.simulator = Simulator(config)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_requested: asyncio.Event | None = None
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="grove-simulator", daemon=True)

    @property
    def port(self) -> int:
        return self.simulator.port

    @property
    def base_url(self) -> str:
        return self.simulator.base_url

    def start(self) -> None:
        self._thread.start()
        if not self._ready.wait(START_TIMEOUT_S):
            raise TimeoutError(f"the simulator did not start within {START_TIMEOUT_S} s")
        if self._failure is not None:
            self._thread.join(STOP_TIMEOUT_S)
            raise RuntimeError(f"the simulator failed to start: {self._failure}") from self._failure

    def stop(self) -> None:
        loop, stop_requested = self._loop, self._stop_requested
        if loop is not None and stop_requested is not None and self._thread.is_alive():
            with contextlib.suppress(RuntimeError):  # the loop already closed
                loop.call_soon_threadsafe(stop_requested.set)
        if self._thread.ident is not None:
            self._thread.join(STOP_TIMEOUT_S)
            if self._thread.is_alive():
                raise TimeoutError(f"the simulator did not stop within {STOP_TIMEOUT_S} s")

    def __enter__(self) -> SimulatorThread:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def _run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop_requested = asyncio.Event()
        try:
            await self.simulator.start()
        except BaseException as exc:  # handed to the starting thread, which raises it
            self._failure = exc
            self._ready.set()
            return
        self._ready.set()
        try:
            await self._stop_requested.wait()
        finally:
            await self.simulator.stop()


def run_forever(config: SimulatorConfig, on_ready: Callable[[str], None]) -> None:
    """Serve until Ctrl+C; `on_ready` gets the base URL once the port is bound. Returns after
    a clean stop."""
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(config, on_ready))


async def _serve(config: SimulatorConfig, on_ready: Callable[[str], None]) -> None:
    simulator = Simulator(config)
    await simulator.start()
    try:
        on_ready(simulator.base_url)
        await asyncio.Event().wait()
    finally:
        await simulator.stop()
