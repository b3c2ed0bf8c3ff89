"""Starting and stopping the simulator: `SimulatorThread`, `Simulator` with streams in flight,
`run_forever` under Ctrl+C, `base_urls`, and settings that are refused or kept secret."""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import sys
import time

import httpx
import pytest

from grove.simulator import (
    Simulator,
    SimulatorConfig,
    SimulatorThread,
    base_urls,
)

KEY = "sim-lifecycle-key-93ab"
TTFT_S = 30  # a first token the tests never wait for
CHAT_BODY = {"model": "gpt-x", "messages": [{"role": "user", "content": "hi"}]}


def test_thread_serves_on_a_free_port_and_stops_on_exit() -> None:
    with SimulatorThread(SimulatorConfig(api_key=KEY)) as simulator:
        port = simulator.port
        assert port > 0 and simulator.base_url == f"http://127.0.0.1:{port}"
        assert base_urls(simulator) == {
            "anthropic": simulator.base_url,
            "openai": simulator.base_url,
            "google": simulator.base_url,
        }
        response = httpx.post(
            simulator.base_url + "/v1/chat/completions",
            headers={"authorization": f"Bearer {KEY}"},
            json=CHAT_BODY,
        )
        assert response.status_code == 200
    with pytest.raises(httpx.ConnectError):
        httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=CHAT_BODY)


def test_thread_start_failure_is_raised_on_enter() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        simulator = SimulatorThread(SimulatorConfig(api_key=KEY, port=port))
        with pytest.raises(RuntimeError, match="failed to start"), simulator:
            pass


async def test_stop_ends_streams_in_flight_promptly() -> None:
    """Five streams whose first token is half a minute away: stop cuts them off (they end in
    a protocol error, not a reply) and returns long before that token was due."""
    simulator = Simulator(SimulatorConfig(api_key=KEY, ttft_ms=TTFT_S * 1000))
    await simulator.start()
    async with httpx.AsyncClient(base_url=simulator.base_url, timeout=60) as client:

        async def slow_stream() -> None:
            async with client.stream(
                "POST",
                "/v1/chat/completions",
                headers={"authorization": f"Bearer {KEY}"},
                json={**CHAT_BODY, "stream": True},
            ) as response:
                async for _ in response.aiter_bytes():
                    pass

        streams = [asyncio.create_task(slow_stream()) for _ in range(5)]
        # Every stream's request read, whatever the load: a stream still connecting when
        # stop() closes the listener would fail to connect instead of being cut off.
        for _ in range(1000):
            if len(simulator.received) == 5:
                break
            await asyncio.sleep(0.02)
        assert len(simulator.received) == 5
        started = time.monotonic()
        await simulator.stop()
        assert time.monotonic() - started < TTFT_S / 2
        results = await asyncio.gather(*streams, return_exceptions=True)
    assert [type(result) for result in results] == [httpx.RemoteProtocolError] * 5


def test_run_forever_prints_its_url_and_stops_cleanly_on_interrupt() -> None:
    script = (
        "from grove.simulator import SimulatorConfig, run_forever\n"
        f"run_forever(SimulatorConfig(api_key={KEY!r}), "
        "lambda url: print('listening on', url, flush=True))\n"
        "print('stopped', flush=True)\n"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("listening on http://127.0.0.1:")
        url = line.split()[-1]
        response = httpx.post(
            url + "/v1/chat/completions",
            headers={"authorization": f"Bearer {KEY}"},
            json=CHAT_BODY,
            timeout=10,
        )
        assert response.status_code == 200
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=15)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err
    assert out.strip() == "stopped"
    assert KEY not in out + err + line


def test_settings_are_checked_and_the_key_is_not_shown() -> None:
    config = SimulatorConfig(api_key=KEY)
    assert KEY not in repr(config)
    for bad, message in [
        ({"port": 70_000}, "port must be between"),
        ({"api_key": ""}, "api_key must not be empty"),
        ({"ttft_ms": -1}, "ttft_ms must be 0 or more"),
        ({"tps": -2}, "tps must be 0"),
        ({"tokens": -1}, "tokens must be between"),
        ({"events_per_write": 0}, "events_per_write must be 1 or more"),
    ]:
        with pytest.raises(ValueError, match=message):
            SimulatorConfig(**bad)  # type: ignore[arg-type]
